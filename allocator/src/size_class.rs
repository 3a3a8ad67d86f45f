//! Small-object size classes: 16-byte steps up to 128 bytes, then four classes per doubling up
//! to [`SMALL_MAX`] (at most 25% internal waste). Larger requests are page runs.

use crate::os::PAGE;

/// Largest request served from size classes.
pub(crate) const SMALL_MAX: usize = 16 << 10;
/// Number of size classes.
pub(crate) const CLASSES: usize = 36;
/// Largest alignment a size class can honour (blocks of a slab start at a page boundary).
pub(crate) const SMALL_ALIGN_MAX: usize = PAGE;

/// Byte size of each class.
pub(crate) const CLASS_SIZE: [usize; CLASSES] = {
    let mut sizes = [0; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        sizes[c] = if c < 8 {
            16 * (c + 1)
        } else {
            let base = 128 << ((c - 8) / 4);
            base + ((c - 8) % 4 + 1) * (base / 4)
        };
        c += 1;
    }
    sizes
};

/// The class of a request of `size` bytes with alignment at most 16 (`size <= SMALL_MAX`).
#[inline(always)]
pub(crate) fn class_of(size: usize) -> usize {
    debug_assert!(size <= SMALL_MAX);
    if size <= 128 {
        size.max(1).div_ceil(16) - 1
    } else {
        let lg = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
        8 + (lg - 7) * 4 + (((size - 1) >> (lg - 2)) & 3)
    }
}

/// The class serving `size` bytes aligned to `align`, or `None` if the request is a page run.
///
/// Deterministic in `(size, align)`, which is how `dealloc` finds the class again from the
/// layout alone.
#[inline(always)]
pub(crate) fn class_for(size: usize, align: usize) -> Option<usize> {
    if align <= 16 {
        if size <= SMALL_MAX {
            return Some(class_of(size));
        }
        return None;
    }
    class_for_aligned(size, align)
}

#[cold]
fn class_for_aligned(size: usize, align: usize) -> Option<usize> {
    if align > SMALL_ALIGN_MAX {
        return None;
    }
    let size = size.max(align);
    if size > SMALL_MAX {
        return None;
    }
    (class_of(size)..CLASSES).find(|&c| CLASS_SIZE[c] % align == 0)
}

/// Pages of one slab of class `class`: at least 64 KiB and at least 8 blocks.
pub(crate) const fn slab_pages(class: usize) -> usize {
    let min = 16;
    let want = (8 * CLASS_SIZE[class]).div_ceil(PAGE);
    if want > min {
        want
    } else {
        min
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_grow_and_end_at_small_max() {
        assert_eq!(CLASS_SIZE[0], 16);
        assert_eq!(CLASS_SIZE[7], 128);
        assert_eq!(CLASS_SIZE[8], 160);
        assert_eq!(CLASS_SIZE[CLASSES - 1], SMALL_MAX);
        assert!(CLASS_SIZE.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn class_of_is_the_smallest_fitting_class() {
        for size in 0..=SMALL_MAX {
            let c = class_of(size);
            assert!(CLASS_SIZE[c] >= size, "size {size}");
            assert!(c == 0 || CLASS_SIZE[c - 1] < size, "size {size}");
        }
    }

    #[test]
    fn aligned_classes_are_multiples_of_the_alignment() {
        let mut align = 32;
        while align <= SMALL_ALIGN_MAX {
            for size in [1, 17, 100, 1000, 4096, 5000, SMALL_MAX] {
                if let Some(c) = class_for(size, align) {
                    assert_eq!(CLASS_SIZE[c] % align, 0);
                    assert!(CLASS_SIZE[c] >= size);
                }
            }
            assert!(class_for(1, align).is_some());
            align *= 2;
        }
        assert_eq!(class_for(8, 8192), None);
        assert_eq!(class_for(SMALL_MAX + 1, 8), None);
    }

    #[test]
    fn slabs_hold_at_least_eight_blocks() {
        for (c, &size) in CLASS_SIZE.iter().enumerate() {
            assert!(slab_pages(c) * PAGE / size >= 8);
        }
    }
}

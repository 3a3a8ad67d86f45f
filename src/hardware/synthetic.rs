//! The built-in parser of hwloc's synthetic topology syntax (the symmetric subset), so that
//! placement logic can be tested on machines this one is not, without hwloc. The syntax is
//! documented in the [module docs](super#synthetic-topologies).

use super::{Level, RawPu, Topology, TopologyError, TopologySource};

/// Synthetic descriptions with more PUs than this are refused: the model holds one entry per
/// PU, and no real machine is near.
const MAX_PUS: usize = 1 << 20;

/// What a level name of the description stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A level of the model.
    Modelled(Level),
    /// A level hwloc knows but the model does not (die, group, caches): its count multiplies
    /// the objects below it.
    Ignored,
}

fn classify(name: &str) -> Option<Kind> {
    let lower = name.to_ascii_lowercase();
    let kind = match lower.as_str() {
        "package" | "pack" | "socket" => Kind::Modelled(Level::Package),
        "numa" | "numanode" | "node" => Kind::Modelled(Level::Numa),
        "core" => Kind::Modelled(Level::Core),
        "pu" => Kind::Modelled(Level::Pu),
        "die" | "group" => Kind::Ignored,
        _ if is_cache(&lower) => Kind::Ignored,
        _ => return None,
    };
    Some(kind)
}

/// `l1`..`l5`, then optionally `d`, `i` or `u`, then optionally `cache`.
fn is_cache(lower: &str) -> bool {
    let Some(rest) = lower.strip_prefix('l') else {
        return false;
    };
    let mut chars = rest.chars();
    if !matches!(chars.next(), Some('1'..='5')) {
        return false;
    }
    let rest = chars.as_str();
    let rest = rest
        .strip_prefix(|c| matches!(c, 'd' | 'i' | 'u'))
        .unwrap_or(rest);
    rest.is_empty() || rest == "cache"
}

/// Splits the description into `name:count` tokens, joining `name: count` as hwloc allows.
fn tokens(desc: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in desc.split_whitespace() {
        match out.last_mut() {
            Some(prev) if prev.ends_with(':') => prev.push_str(word),
            _ => out.push(word.to_owned()),
        }
    }
    out
}

/// Parses `desc` into a topology that does not bind (the caller decides about binding).
pub(super) fn parse(desc: &str) -> Result<Topology, TopologyError> {
    let err =
        |what: String| TopologyError::new(format!("invalid synthetic topology {desc:?}: {what}"));
    let tokens = tokens(desc);
    if tokens.is_empty() {
        return Err(err(
            "it is empty; describe the levels top down, e.g. \"numa:2 core:1 pu:1\"".into(),
        ));
    }

    let mut levels: Vec<(Kind, usize)> = Vec::with_capacity(tokens.len());
    for token in &tokens {
        if token.contains(['(', ')', '[', ']']) {
            return Err(err(format!(
                "{token:?} has attributes or attached memory, which only hwloc's own parser \
                 accepts (cargo feature `hwloc`, Topology::from_hwloc)"
            )));
        }
        let Some((name, count)) = token.split_once(':') else {
            return Err(err(format!(
                "{token:?} is not of the form level:count, e.g. \"core:4\""
            )));
        };
        let kind = classify(name).ok_or_else(|| {
            err(format!(
                "unknown level {name:?}; known levels are package (pack, socket), numa \
                 (numanode, node), core, pu, and die, group, l1..l5 which are not modelled"
            ))
        })?;
        let count: usize = count.parse().map_err(|_| {
            err(format!(
                "the count {count:?} of level {name:?} is not a positive integer"
            ))
        })?;
        if count == 0 {
            return Err(err(format!(
                "level {name:?} has count 0; counts start at 1"
            )));
        }
        if let Kind::Modelled(level) = kind {
            if levels.iter().any(|&(k, _)| k == kind) {
                return Err(err(format!("level {level} appears twice")));
            }
        }
        let seen = |l: Level| levels.iter().any(|&(k, _)| k == Kind::Modelled(l));
        match kind {
            Kind::Modelled(Level::Package) if seen(Level::Core) => {
                return Err(err("package must come before core".into()));
            }
            Kind::Ignored if seen(Level::Core) => {
                return Err(err(format!(
                    "{name:?} must come before core: caches, dies and groups contain cores"
                )));
            }
            _ => {}
        }
        if seen(Level::Pu) {
            return Err(err(format!(
                "{name:?} comes after pu, but pu must be the last level"
            )));
        }
        levels.push((kind, count));
    }
    if levels.last().map(|&(k, _)| k) != Some(Kind::Modelled(Level::Pu)) {
        return Err(err(
            "it must end with the pu level, e.g. \"core:2 pu:1\" (as hwloc requires)".into(),
        ));
    }

    // pus_below[i]: PUs in one object of level i.
    let mut pus_below = vec![1usize; levels.len()];
    let mut total = 1usize;
    for i in (0..levels.len()).rev() {
        pus_below[i] = total;
        total = total
            .checked_mul(levels[i].1)
            .filter(|&n| n <= MAX_PUS)
            .ok_or_else(|| err(format!("it has more than {MAX_PUS} PUs")))?;
    }
    let depth_of = |l: Level| levels.iter().position(|&(k, _)| k == Kind::Modelled(l));
    let (package, numa, core) = (
        depth_of(Level::Package),
        depth_of(Level::Numa),
        depth_of(Level::Core),
    );
    let object = |depth: usize, pu: usize| (pu / pus_below[depth]) as u64;
    let raw: Vec<RawPu> = (0..total)
        .map(|pu| RawPu {
            os_index: pu,
            package: package.map(|d| object(d, pu)),
            numa: numa.map_or(0, |d| object(d, pu)),
            core: core.map(|d| (0, object(d, pu))),
        })
        .collect();
    Topology::from_raw(
        &raw,
        TopologySource::Synthetic,
        false,
        desc.trim().to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(t: &Topology) -> Vec<(usize, usize, usize, usize)> {
        t.pus()
            .iter()
            .map(|p| (p.os_index, p.package, p.numa, p.core))
            .collect()
    }

    #[test]
    fn two_numa_nodes_of_one_core() {
        let t = parse("numa:2 core:1 pu:1").unwrap();
        assert_eq!(ids(&t), [(0, 0, 0, 0), (1, 0, 1, 1)]);
        assert_eq!(t.levels(), [Level::Numa, Level::Core, Level::Pu]);
        assert_eq!(t.count(Level::Package), 0);
        assert_eq!(t.source(), TopologySource::Synthetic);
        assert!(!t.binds_for_real());
        assert_eq!(t.description(), "numa:2 core:1 pu:1");
    }

    #[test]
    fn full_tree_numbers_objects_depth_first() {
        let t = parse("package:2 numa:2 core:4 pu:2").unwrap();
        let counts: Vec<usize> = Level::ALL.iter().map(|&l| t.count(l)).collect();
        assert_eq!(counts, [2, 4, 16, 32]);
        assert_eq!(t.levels(), Level::ALL);
        for (i, p) in t.pus().iter().enumerate() {
            assert_eq!(p.os_index, i);
            assert_eq!(p.core, i / 2);
            assert_eq!(p.numa, i / 8);
            assert_eq!(p.package, i / 16);
        }
    }

    #[test]
    fn names_are_hwloc_aliases_and_case_insensitive() {
        let a = parse("Socket:2 NUMANode:1 Core:2 PU:2").unwrap();
        let b = parse("pack:2 node:1 core:2 pu:2").unwrap();
        assert_eq!(ids(&a), ids(&b));
        assert_eq!(a.count(Level::Numa), 2, "one node per package");
    }

    #[test]
    fn ignored_levels_multiply_counts() {
        let t = parse("package:1 l3:2 L2Cache:2 l1d:1 core:1 pu:2").unwrap();
        assert_eq!(t.count(Level::Core), 4);
        assert_eq!(t.count(Level::Pu), 8);
        let t = parse("die:2 group:2 core:1 pu:1").unwrap();
        assert_eq!(t.count(Level::Core), 4);
    }

    #[test]
    fn absent_levels_follow_hwloc() {
        let t = parse("pack:2 pu:2").unwrap();
        assert_eq!(t.levels(), [Level::Package, Level::Numa, Level::Pu]);
        assert_eq!(t.count(Level::Numa), 1);
        let t = parse("pu:4").unwrap();
        assert_eq!(t.levels(), [Level::Numa, Level::Pu]);
        // NUMA nodes may sit above packages, as hwloc allows.
        let t = parse("numa:2 pack:2 core:1 pu:1").unwrap();
        assert_eq!((t.count(Level::Numa), t.count(Level::Package)), (2, 4));
    }

    #[test]
    fn whitespace_is_flexible() {
        assert_eq!(
            ids(&parse("  core: 2\tpu:1 ").unwrap()),
            ids(&parse("core:2 pu:1").unwrap())
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (desc, needle) in [
            ("", "empty"),
            ("   ", "empty"),
            ("board:2 pu:1", "unknown level \"board\""),
            ("core:0 pu:1", "count 0"),
            ("core:two pu:1", "\"two\""),
            ("core:-1 pu:1", "\"-1\""),
            ("core:2x pu:1", "\"2x\""),
            ("core pu:1", "level:count"),
            ("numa:2 numa:2 pu:1", "numa appears twice"),
            ("pu:2 pu:2", "pu appears twice"),
            ("core:2", "end with the pu level"),
            ("pu:2 core:2", "pu must be the last level"),
            ("core:2 package:2 pu:1", "package must come before core"),
            ("core:2 l1:2 pu:1", "before core"),
            ("core:2(indexes=0,1) pu:1", "attributes"),
            ("numa:2 [numa] pu:1", "attributes"),
            ("core:65536 pu:65536", "more than"),
            ("core:18446744073709551615 pu:2", "more than"),
        ] {
            let e = parse(desc).unwrap_err().to_string();
            assert!(e.contains(needle), "{desc:?}: {e}");
            assert!(e.starts_with("invalid synthetic topology"), "{e}");
        }
    }
}

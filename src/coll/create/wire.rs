//! The bytes an [`Ask`] travels as when a creation spans processes.
//!
//! ## Design
//!
//! A creation on a communicator whose members live in several processes
//! cannot meet in one process's memory, so every rank sends its ask to
//! every other (an all-gather, `create.rs`) and each rank decides on the
//! same asks. Everything [`decide`](super::decide) compares travels: the
//! call, color, key and what must agree (grids, graphs and edges whole, so
//! a mismatch is described as in one process). A call site does not travel
//! (a `&'static Location` names this binary's memory): a decoded ask
//! carries the decoding rank's own site, and errors about a rank of another
//! process show that site for it.
//!
//! Little-endian, no versioning: the processes of one job run one build
//! (checked at the transport's handshake). Inter-communicator plans do not
//! travel; their asks carry only the call, and `decide` refuses them.

use std::panic::Location;
use std::sync::Arc;

use super::{Agree, Ask, Creation};
use crate::comm::grid::Grid;
use crate::comm::topo::{Adjacency, Graph};
use crate::error::Error;
use crate::{Count, Rank};

const CREATIONS: [Creation; 12] = [
    Creation::Duplicate,
    Creation::Split,
    Creation::Shared,
    Creation::Subgroup,
    Creation::Cartesian,
    Creation::CartesianSub,
    Creation::Graph,
    Creation::DistGraph,
    Creation::InterSide,
    Creation::Merge,
    Creation::Host,
    Creation::Process,
];

/// `ask` as bytes.
pub(super) fn encode(ask: &Ask) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    let creation = CREATIONS
        .iter()
        .position(|&c| c == ask.creation)
        .expect("every creation is listed");
    out.push(creation as u8);
    match ask.color {
        Some(color) => {
            out.push(1);
            put_i32(&mut out, color);
        }
        None => {
            out.push(0);
            put_i32(&mut out, 0);
        }
    }
    put_i32(&mut out, ask.key);
    match &ask.agree {
        Agree::Nothing | Agree::Inter(_) | Agree::Merge { .. } => out.push(0),
        Agree::Group { size, digest } => {
            out.push(1);
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&digest.to_le_bytes());
        }
        Agree::Grid(grid) => {
            out.push(2);
            put_list(&mut out, &grid.dims);
            put_bools(&mut out, &grid.periods);
        }
        Agree::Retain(retain) => {
            out.push(3);
            put_bools(&mut out, retain);
        }
        Agree::Graph(graph) => {
            out.push(4);
            put_list(&mut out, &graph.index);
            put_list(&mut out, &graph.edges);
        }
        Agree::Adjacent(adj) => {
            out.push(5);
            put_list(&mut out, &adj.sources);
            put_weights(&mut out, adj.source_weights.as_deref());
            put_list(&mut out, &adj.destinations);
            put_weights(&mut out, adj.destination_weights.as_deref());
        }
        Agree::Edges(edges, weighted) => {
            out.push(6);
            out.push(u8::from(*weighted));
            put_len(&mut out, edges.len());
            for &(from, to, weight) in edges.iter() {
                put_i32(&mut out, from);
                put_i32(&mut out, to);
                put_i32(&mut out, weight);
            }
        }
    }
    out
}

/// The ask of parent rank `rank` from `bytes`; `site` stands in for its
/// call site (module docs).
pub(super) fn decode(
    bytes: &[u8],
    rank: Rank,
    site: &'static Location<'static>,
) -> Result<Ask, Error> {
    let mut r = Reader { bytes, at: 0 };
    let creation = *CREATIONS.get(r.u8()? as usize).ok_or_else(garbled)?;
    let has_color = r.u8()? != 0;
    let color = r.i32()?;
    let key = r.i32()?;
    let agree = match r.u8()? {
        0 => Agree::Nothing,
        1 => Agree::Group {
            size: r.u32()?,
            digest: r.u64()?,
        },
        2 => Agree::Grid(Arc::new(Grid {
            dims: r.list()?.into(),
            periods: r.bools()?.into(),
        })),
        3 => Agree::Retain(r.bools()?.into()),
        4 => Agree::Graph(Arc::new(Graph {
            index: r.list()?.into(),
            edges: r.list()?.into(),
        })),
        5 => Agree::Adjacent(Arc::new(Adjacency {
            sources: r.list()?,
            source_weights: r.weights()?,
            destinations: r.list()?,
            destination_weights: r.weights()?,
        })),
        6 => {
            let weighted = r.u8()? != 0;
            let n = r.len()?;
            let mut edges = Vec::with_capacity(n.min(bytes.len() / 12));
            for _ in 0..n {
                edges.push((r.i32()?, r.i32()?, r.i32()?));
            }
            Agree::Edges(Arc::new(edges), weighted)
        }
        _ => return Err(garbled()),
    };
    if r.at != bytes.len() {
        return Err(garbled());
    }
    Ok(Ask {
        creation,
        color: has_color.then_some(color),
        key,
        agree,
        rank,
        site,
    })
}

#[cold]
fn garbled() -> Error {
    Error::unsupported(
        "a communicator creation's ask from another process that this build cannot read \
         (garbled, or a process of another build)",
    )
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_list(out: &mut Vec<u8>, list: &[Count]) {
    put_len(out, list.len());
    for &v in list {
        put_i32(out, v);
    }
}

fn put_bools(out: &mut Vec<u8>, list: &[bool]) {
    put_len(out, list.len());
    out.extend(list.iter().map(|&b| u8::from(b)));
}

fn put_weights(out: &mut Vec<u8>, weights: Option<&[Count]>) {
    match weights {
        Some(w) => {
            out.push(1);
            put_list(out, w);
        }
        None => out.push(0),
    }
}

/// Reads what the `put_*` functions wrote; running short is an error.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let end = self.at.checked_add(N).ok_or_else(garbled)?;
        let got = self.bytes.get(self.at..end).ok_or_else(garbled)?;
        self.at = end;
        Ok(got.try_into().expect("N bytes"))
    }

    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    /// A length no longer than the bytes left (each element takes one).
    fn len(&mut self) -> Result<usize, Error> {
        let n = self.u32()? as usize;
        if n > self.bytes.len() - self.at {
            return Err(garbled());
        }
        Ok(n)
    }

    fn list(&mut self) -> Result<Vec<Count>, Error> {
        let n = self.len()?;
        (0..n).map(|_| self.i32()).collect()
    }

    fn bools(&mut self) -> Result<Vec<bool>, Error> {
        let n = self.len()?;
        (0..n).map(|_| Ok(self.u8()? != 0)).collect()
    }

    fn weights(&mut self) -> Result<Option<Vec<Count>>, Error> {
        match self.u8()? {
            0 => Ok(None),
            _ => Ok(Some(self.list()?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(ask: Ask) -> Ask {
        let site = Location::caller();
        decode(&encode(&ask), ask.rank, site).expect("decodes")
    }

    #[test]
    fn every_agreement_survives_the_trip() {
        let agrees = [
            Agree::Nothing,
            Agree::Group {
                size: 3,
                digest: 0xdead_beef_0123,
            },
            Agree::Grid(Arc::new(Grid {
                dims: vec![2, 3].into(),
                periods: vec![true, false].into(),
            })),
            Agree::Retain(vec![false, true].into()),
            Agree::Graph(Arc::new(Graph {
                index: vec![1, 2].into(),
                edges: vec![1, 0].into(),
            })),
            Agree::Adjacent(Arc::new(Adjacency {
                sources: vec![1],
                source_weights: Some(vec![5]),
                destinations: vec![2, 3],
                destination_weights: None,
            })),
            Agree::Edges(Arc::new(vec![(0, 1, 7), (2, 0, -1)]), true),
        ];
        for agree in agrees {
            let ask = Ask::new(Creation::Split, Some(-4), 9).agreeing(agree.clone());
            let back = round_trip(ask);
            assert_eq!(back.agree, agree);
            assert_eq!(
                (back.creation, back.color, back.key),
                (Creation::Split, Some(-4), 9)
            );
        }
        let none = round_trip(Ask::new(Creation::Shared, None, -1));
        assert_eq!(
            (none.creation, none.color, none.key),
            (Creation::Shared, None, -1)
        );
    }

    #[test]
    fn short_or_garbled_bytes_are_errors() {
        let ask = Ask::new(Creation::Cartesian, Some(0), 0).agreeing(Agree::Grid(Arc::new(Grid {
            dims: vec![4].into(),
            periods: vec![true].into(),
        })));
        let bytes = encode(&ask);
        let site = Location::caller();
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], 0, site).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&long, 0, site).is_err());
        let mut bad = bytes;
        bad[0] = 200;
        assert!(decode(&bad, 0, site).is_err());
    }
}

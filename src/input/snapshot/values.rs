//! A node of the arena read as what the schema wants there (an integer, a
//! string, a pair, a frame, a stack), interned into the model's tables,
//! with the record path in every error.

use super::{Cx, P, R, STR_FRONT, err, full};
use crate::core::hash::FxBuild;
use crate::input::value::{Node, Vid};
use crate::model::*;
use std::collections::HashMap;

impl<'a> Cx<'a> {
    pub(super) fn node(&self, v: Vid) -> &'a Node {
        self.a.get(v)
    }
    pub(super) fn over_budget(&self) -> bool {
        self.work > self.budget
    }
    pub(super) fn spend(&mut self, n: u64, p: &P) -> R<()> {
        self.work = self.work.saturating_add(n);
        if self.over_budget() {
            return err(
                p,
                format!(
                    "shared references (pickle memo) expand to more than {} records, frames and \
                     settings values, out of proportion to the {} values the file holds; refusing \
                     to expand them",
                    self.budget,
                    self.a.values()
                ),
            );
        }
        Ok(())
    }
    pub(super) fn dict(&self, v: Vid, p: &P) -> R<&'a [(Vid, Vid)]> {
        match self.node(v) {
            Node::Dict(d) => Ok(d),
            Node::Record(l, _) => err(
                p,
                format!("expected this record, found {}", self.record_kind(*l)),
            ),
            n => err(p, format!("expected a dict, found {}", n.kind())),
        }
    }
    pub(super) fn list(&self, v: Vid, p: &P) -> R<&'a [Vid]> {
        match self.node(v) {
            Node::List(l) => Ok(l),
            Node::Tuple(l) => Ok(l),
            Node::Stack(s) => Ok(self.listed(*s)),
            // Read whole by the `device_traces` loop; the decoder made every
            // other one a `List`.
            Node::Trace(l, _) if self.lists[*l as usize].is_blocks() => {
                err(p, "expected a list, found a segment's block list")
            }
            Node::Trace(..) => err(p, "expected a list, found a list of trace entries"),
            n => err(p, format!("expected a list, found {}", n.kind())),
        }
    }
    pub(super) fn int(&self, v: Vid, p: &P) -> R<i64> {
        match self.node(v) {
            Node::Int(i) => Ok(*i),
            Node::Bool(b) => Ok(*b as i64),
            Node::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(*f as i64),
            Node::BigInt => err(p, "integer does not fit in 64 bits"),
            n => err(p, format!("expected an int, found {}", n.kind())),
        }
    }
    pub(super) fn uint(&self, v: Vid, p: &P) -> R<u64> {
        let i = self.int(v, p)?;
        if i < 0 {
            return err(p, format!("expected a non-negative int, found {i}"));
        }
        Ok(i as u64)
    }
    pub(super) fn string(&self, v: Vid, p: &P) -> R<&'a str> {
        match self.node(v) {
            Node::Str(s) => Ok(s),
            n => err(p, format!("expected a str, found {}", n.kind())),
        }
    }
    #[inline]
    pub(super) fn str_id(&mut self, v: Vid, p: &P) -> R<StrId> {
        // Every trace entry names the same few strings (`compile_context`,
        // `user_metadata`): a direct-mapped cache in front of the table.
        let slot = v as usize % STR_FRONT;
        if self.str_front[slot].0 == v {
            return Ok(self.str_front[slot].1);
        }
        self.str_id_missed(v, p)
    }
    /// [`Cx::str_id`] past its cache: the interner finds the string by its
    /// text (no map from node to id beside it, which a file with a new
    /// string at every entry would make as long as its trace).
    #[cold]
    pub(super) fn str_id_missed(&mut self, v: Vid, p: &P) -> R<StrId> {
        let slot = v as usize % STR_FRONT;
        let s = self.string(v, p)?;
        let id = full(self.intern.string(s), p)?;
        self.str_front[slot] = (v, id);
        Ok(id)
    }
    pub(super) fn bool(&self, v: Vid, p: &P) -> R<bool> {
        match self.node(v) {
            Node::Bool(b) => Ok(*b),
            Node::Int(i) => Ok(*i != 0),
            n => err(p, format!("expected a bool, found {}", n.kind())),
        }
    }
    pub(super) fn pair(&self, v: Vid, p: &P) -> R<(i64, i64)> {
        let l = self.list(v, p)?;
        if l.len() != 2 {
            return err(p, format!("expected a pair, found {} items", l.len()));
        }
        Ok((self.int(l[0], &p.idx(0))?, self.int(l[1], &p.idx(1))?))
    }

    /// The frame of node `v`: nearly always one read before (stacks share
    /// their frames), found by its number without the slow path's stack
    /// frame.
    #[inline]
    pub(super) fn frame(&mut self, v: Vid, p: &P) -> R<FrameId> {
        match self.frame_ids[v as usize] {
            0 => self.frame_new(v, p),
            id => Ok(FrameId(id - 1)),
        }
    }
    /// [`Cx::frame`] of a node not read before.
    #[inline(never)]
    fn frame_new(&mut self, v: Vid, p: &P) -> R<FrameId> {
        self.spend(1, p)?;
        let f = match self.node(v) {
            Node::Dict(d) => {
                let mut filename = None;
                let mut line = 0;
                let mut name = None;
                for &(k, val) in d.iter() {
                    match self.a.as_str(k) {
                        Some("filename") => filename = Some(val),
                        Some("line") => line = self.int(val, &p.key("line"))?,
                        Some("name") => name = Some(val),
                        _ => {}
                    }
                }
                // Interned in a fixed order so that the tables do not depend
                // on the key order of the file.
                let filename = match filename {
                    Some(v) => self.str_id(v, &p.key("filename"))?,
                    None => full(self.intern.string(""), p)?,
                };
                let name = match name {
                    Some(v) => self.str_id(v, &p.key("name"))?,
                    None => full(self.intern.string(""), p)?,
                };
                Frame {
                    filename,
                    line,
                    name,
                }
            }
            // 2.0 `cpp_frames` and some converters: a frame as one string.
            Node::Str(s) => {
                let empty = full(self.intern.string(""), p)?;
                let name = full(self.intern.string(s), p)?;
                Frame {
                    filename: empty,
                    line: 0,
                    name,
                }
            }
            n => return err(p, format!("expected a frame dict, found {}", n.kind())),
        };
        let id = self.intern.frame(f);
        self.frame_ids[v as usize] = id.0 + 1;
        Ok(id)
    }

    pub(super) fn stack(&mut self, v: Vid, p: &P) -> R<StackId> {
        if let Node::Stack(s) = self.node(v) {
            return self.pstack(*s, p);
        }
        if let Some(id) = self.stack_cache.get(&v) {
            return Ok(*id);
        }
        if matches!(self.node(v), Node::None) {
            return Ok(StackId::EMPTY);
        }
        let l = self.list(v, p)?;
        self.spend(l.len() as u64, p)?;
        let mut frames = Vec::with_capacity(l.len());
        for (i, &f) in l.iter().enumerate() {
            frames.push(self.frame(f, &p.idx(i))?);
        }
        let id = self.intern.stack(frames);
        self.stack_cache.insert(v, id);
        Ok(id)
    }

    /// A frames list the sink took, by its number.
    #[inline]
    pub(super) fn pstack(&mut self, s: u32, p: &P) -> R<StackId> {
        match self.pstack_ids[s as usize] {
            0 => {}
            id => return Ok(StackId(id - 1)),
        }
        self.pstack_new(s, p)
    }
    /// [`Cx::pstack`] for a stack not yet interned. A list no node names
    /// is read here only: it is dropped once the model holds its stack (on
    /// an error it stays, as it was).
    #[cold]
    pub(super) fn pstack_new(&mut self, s: u32, p: &P) -> R<StackId> {
        let plisted: &'a HashMap<u32, Box<[Vid]>, FxBuild> = self.plisted;
        let listed = plisted.get(&s);
        let owned = match listed {
            Some(_) => Box::default(),
            None => std::mem::take(
                self.pstacks
                    .get_mut(s as usize)
                    .expect("a stack the sink took"),
            ),
        };
        let l: &[Vid] = listed.map_or(&owned, |l| l);
        let frames = (|| {
            self.spend(l.len() as u64, p)?;
            let mut frames = Vec::with_capacity(l.len());
            for (i, &f) in l.iter().enumerate() {
                frames.push(self.frame(f, &p.idx(i))?);
            }
            Ok(frames)
        })();
        let frames = match frames {
            Ok(f) => f,
            Err(e) => {
                if listed.is_none() {
                    self.pstacks[s as usize] = owned;
                }
                return Err(e);
            }
        };
        let id = self.intern.stack(frames);
        self.pstack_ids[s as usize] = id.0 + 1;
        Ok(id)
    }

    /// A frames list the sink took that a node names, as a list.
    pub(super) fn listed(&self, s: u32) -> &'a [Vid] {
        let plisted: &'a HashMap<u32, Box<[Vid]>, FxBuild> = self.plisted;
        plisted.get(&s).map_or(&[], |l| l)
    }

    /// Python frames followed by 2.0-style `cpp_frames`. Only the combined
    /// stack is interned, so that the model holds exactly the stacks its
    /// records use (and re-reading the JSON form yields the same tables).
    pub(super) fn stack2(&mut self, py: Option<Vid>, cpp: Option<Vid>, p: &P) -> R<StackId> {
        let cpp = cpp.filter(|&c| match self.node(c) {
            Node::None => false,
            Node::List(l) => !l.is_empty(),
            Node::Tuple(l) => !l.is_empty(),
            _ => true,
        });
        let Some(c) = cpp else {
            return match py {
                Some(v) => self.stack(v, &p.key("frames")),
                None => Ok(StackId::EMPTY),
            };
        };
        if let Some(id) = self.stack2_cache.get(&(py, c)) {
            return Ok(*id);
        }
        let mut frames = Vec::new();
        for (key, list) in [("frames", py), ("cpp_frames", Some(c))] {
            let Some(v) = list else { continue };
            if matches!(self.node(v), Node::None) {
                continue;
            }
            let pk = p.key(key);
            let l = self.list(v, &pk)?;
            self.spend(l.len() as u64, &pk)?;
            frames.reserve(l.len());
            for (i, &f) in l.iter().enumerate() {
                frames.push(self.frame(f, &pk.idx(i))?);
            }
        }
        let id = self.intern.stack(frames);
        self.stack2_cache.insert((py, c), id);
        Ok(id)
    }
}

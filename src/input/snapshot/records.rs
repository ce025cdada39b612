//! The snapshot's records built from the arena: settings values, blocks,
//! segments, trace entries (read from the arena, or taken by the sink and
//! given their final ids here) and annotations.

use super::{Cx, P, R, SinkList, dedup_keys, err, full};
use crate::input::value::{Node, Vid};
use crate::model::*;

impl<'a> Cx<'a> {
    pub(super) fn setting(&mut self, v: Vid, p: &P, depth: usize) -> R<Setting> {
        if depth > 32 {
            return err(p, "nesting deeper than 32 levels in a settings value");
        }
        self.spend(1, p)?;
        Ok(match self.node(v) {
            Node::None => Setting::None,
            Node::Bool(b) => Setting::Bool(*b),
            Node::Int(i) => Setting::Int(*i),
            Node::BigInt => Setting::Str("<integer beyond 64 bits>".into()),
            Node::Float(f) => Setting::Float(*f),
            Node::Str(s) => Setting::Str(s.to_string()),
            Node::Bytes(b) => Setting::Str(String::from_utf8_lossy(b).into_owned()),
            Node::List(l) => Setting::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| self.setting(*x, &p.idx(i), depth + 1))
                    .collect::<R<_>>()?,
            ),
            Node::Tuple(l) => Setting::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| self.setting(*x, &p.idx(i), depth + 1))
                    .collect::<R<_>>()?,
            ),
            Node::Stack(s) => Setting::List(
                self.listed(*s)
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.setting(*x, &p.idx(i), depth + 1))
                    .collect::<R<_>>()?,
            ),
            Node::Record(l, _) => {
                return err(
                    p,
                    format!("{} where a settings value belongs", self.record_kind(*l)),
                );
            }
            // As the `List` of `Record`s it stands for.
            Node::Trace(l, n) if *n > 0 => {
                self.spend(1, p)?;
                let what = self.record_kind(*l);
                return err(&p.idx(0), format!("{what} where a settings value belongs"));
            }
            Node::Trace(..) => Setting::List(Vec::new()),
            Node::Dict(d) => {
                let mut out = Vec::with_capacity(d.len());
                for &(k, val) in d.iter() {
                    let key = match self.node(k) {
                        Node::Str(s) => s.to_string(),
                        Node::Int(i) => i.to_string(),
                        n => return err(p, format!("settings key of type {}", n.kind())),
                    };
                    let sub = self.setting(val, &p.key(&key), depth + 1)?;
                    out.push((key, sub));
                }
                dedup_keys(&mut out);
                Setting::Map(out)
            }
        })
    }

    /// What a record of sink list `l` is, for errors.
    pub(super) fn record_kind(&self, l: u32) -> &'static str {
        match self.lists[l as usize].is_blocks() {
            true => "a segment's block",
            false => "a trace entry",
        }
    }

    /// The segment's blocks: a block list the sink took whole, moved into
    /// the model with final ids (or, named again, copied from the segment
    /// `done[k]` it went to); else each item by [`Cx::block`].
    fn blocks(&mut self, bv: Vid, p: &P, address: u64, done: &[Segment]) -> R<Vec<Block>> {
        if let Node::Trace(l, n) = *self.node(bv)
            && self.lists[l as usize].is_blocks()
        {
            let li = l as usize;
            let whole = n as usize == self.lists[li].len() && self.blocks_in[li].is_none();
            if !whole {
                return (0..n)
                    .map(|j| self.block_record(l, j, &p.idx(j as usize), done))
                    .collect();
            }
            let mut v = self.lists[li].take_blocks();
            for (j, b) in v.iter_mut().enumerate() {
                let pj = p.idx(j);
                self.spend(1, &pj)?;
                b.frames = self.block_frames(b.frames, &pj)?;
            }
            self.blocks_in[li] = Some(done.len());
            // Its growth's spare room, given back in place.
            v.shrink_to_fit();
            return Ok(v);
        }
        let l = self.list(bv, p)?;
        let mut blocks = Vec::with_capacity(l.len());
        let mut next = address;
        for (i, &b) in l.iter().enumerate() {
            let blk = self.block(b, &p.idx(i), next, done)?;
            next = blk.address.saturating_add(blk.size);
            blocks.push(blk);
        }
        Ok(blocks)
    }

    /// A sink block's provisional frames, numbered.
    fn block_frames(&mut self, f: StackId, p: &P) -> R<StackId> {
        match f.0 {
            0 => Ok(StackId::EMPTY),
            s => self.pstack(s - 1, &p.key("frames")),
        }
    }

    /// The sink's block `i` of list `l`, with final ids.
    fn block_record(&mut self, l: u32, i: u32, p: &P, done: &[Segment]) -> R<Block> {
        self.spend(1, p)?;
        if let Some(k) = self.blocks_in[l as usize] {
            return Ok(done[k].blocks[i as usize].clone());
        }
        let SinkList::Blocks(v) = &self.lists[l as usize] else {
            return err(p, "a trace entry where a segment's block belongs");
        };
        let mut b = v[i as usize].clone();
        b.frames = self.block_frames(b.frames, p)?;
        Ok(b)
    }

    pub(super) fn block(&mut self, v: Vid, p: &P, next_addr: u64, done: &[Segment]) -> R<Block> {
        if let Node::Record(l, i) = *self.node(v) {
            return self.block_record(l, i, p, done);
        }
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut address = None;
        let mut size = None;
        let mut requested = None;
        let mut state = None;
        let mut frames = None;
        let mut history = None;
        for &(k, val) in d {
            match self.a.as_str(k) {
                Some("address") => address = Some(self.uint(val, &p.key("address"))?),
                Some("size") => size = Some(self.uint(val, &p.key("size"))?),
                Some("requested_size") => {
                    requested = Some(self.uint(val, &p.key("requested_size"))?)
                }
                Some("state") => {
                    let pk = p.key("state");
                    let s = self.string(val, &pk)?;
                    state = Some(match BlockState::parse(s) {
                        Some(st) => st,
                        None => return err(&pk, format!("unknown block state {s:?}")),
                    });
                }
                Some("frames") => frames = Some(val),
                Some("history") => history = Some(val),
                _ => {}
            }
        }
        let Some(size) = size else {
            return err(p, "block has no `size`");
        };
        let Some(state) = state else {
            return err(p, "block has no `state`");
        };
        let mut stack = match frames {
            Some(f) => self.stack(f, &p.key("frames"))?,
            None => StackId::EMPTY,
        };
        // 1.13–2.0: history[0] is the current (or last) user.
        if let Some(h) = history {
            let ph = p.key("history");
            if !matches!(self.node(h), Node::None) {
                let hl = self.list(h, &ph)?;
                if let Some(&h0) = hl.first() {
                    let ph0 = ph.idx(0);
                    let hd = self.dict(h0, &ph0)?;
                    let mut hf = None;
                    let mut hc = None;
                    for &(k, val) in hd {
                        match self.a.as_str(k) {
                            Some("real_size") if requested.is_none() => {
                                requested = Some(self.uint(val, &ph0.key("real_size"))?)
                            }
                            Some("frames") => hf = Some(val),
                            Some("cpp_frames") => hc = Some(val),
                            _ => {}
                        }
                    }
                    if stack == StackId::EMPTY {
                        stack = self.stack2(hf, hc, &ph0)?;
                    }
                }
            }
        }
        Ok(Block {
            address: address.unwrap_or(next_addr),
            size,
            requested_size: requested,
            state,
            frames: stack,
        })
    }

    /// A segment; `done`, the segments read before it.
    pub(super) fn segment(&mut self, v: Vid, p: &P, done: &[Segment]) -> R<Segment> {
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut device = 0;
        let mut address = None;
        let mut total_size = None;
        let mut allocated_size = None;
        let mut active_size = None;
        let mut requested_size = None;
        let mut stream = 0;
        let mut segment_type = None;
        let mut pool_id = None;
        let mut is_expandable = None;
        let mut frames_v = None;
        let mut blocks_v = None;
        for &(k, val) in d {
            let Some(key) = self.a.as_str(k) else {
                continue;
            };
            let pk = p.key(key);
            match key {
                "device" => device = self.int(val, &pk)?,
                "address" => address = Some(self.uint(val, &pk)?),
                "total_size" => total_size = Some(self.uint(val, &pk)?),
                "allocated_size" => allocated_size = Some(self.uint(val, &pk)?),
                "active_size" => active_size = Some(self.uint(val, &pk)?),
                "requested_size" => requested_size = Some(self.uint(val, &pk)?),
                "stream" => stream = self.int(val, &pk)?,
                "segment_type" => {
                    let s = self.string(val, &pk)?;
                    segment_type = Some(match s {
                        "small" => SegmentType::Small,
                        "large" => SegmentType::Large,
                        _ => return err(&pk, format!("unknown segment type {s:?}")),
                    })
                }
                "segment_pool_id" if !matches!(self.node(val), Node::None) => {
                    pool_id = Some(self.pair(val, &pk)?)
                }
                "is_expandable" => is_expandable = Some(self.bool(val, &pk)?),
                "frames" => frames_v = Some(val),
                "blocks" => blocks_v = Some(val),
                _ => {}
            }
        }
        let Some(address) = address else {
            return err(p, "segment has no `address`");
        };
        let Some(total_size) = total_size else {
            return err(p, "segment has no `total_size`");
        };
        let frames = match frames_v {
            Some(v) => self.stack(v, &p.key("frames"))?,
            None => StackId::EMPTY,
        };
        let blocks = match blocks_v {
            Some(bv) => self.blocks(bv, &p.key("blocks"), address, done)?,
            None => Vec::new(),
        };
        let segment_type = segment_type.unwrap_or(if total_size <= 2 << 20 {
            SegmentType::Small
        } else {
            SegmentType::Large
        });
        Ok(Segment {
            device,
            address,
            total_size,
            allocated_size,
            active_size,
            requested_size,
            stream,
            segment_type,
            pool_id,
            is_expandable,
            frames,
            blocks,
        })
    }

    pub(super) fn event(&mut self, v: Vid, p: &P) -> R<TraceEvent> {
        if let Node::Record(l, i) = *self.node(v) {
            return self.record(l, i, p);
        }
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut action = None;
        let mut addr = 0;
        let mut size = 0;
        let mut stream = 0;
        let mut time_us = None;
        let mut frames = None;
        let mut cpp = None;
        let mut device_free = None;
        let mut compile_context = None;
        let mut user_metadata = None;
        let mut pool_id = None;
        let mut category = None;
        for &(k, val) in d {
            let Some(key) = self.a.as_str(k) else {
                continue;
            };
            match key {
                "action" => action = Some(val),
                "addr" => addr = self.uint(val, &p.key("addr"))?,
                "size" => size = self.uint(val, &p.key("size"))?,
                "stream" => stream = self.int(val, &p.key("stream"))?,
                "time_us" if !matches!(self.node(val), Node::None) => {
                    time_us = Some(self.int(val, &p.key("time_us"))?)
                }
                "frames" => frames = Some(val),
                "cpp_frames" => cpp = Some(val),
                "device_free" => device_free = Some(self.uint(val, &p.key("device_free"))?),
                "compile_context" => compile_context = Some(val),
                "user_metadata" => user_metadata = Some(val),
                "pool_id" if !matches!(self.node(val), Node::None) => {
                    pool_id = Some(self.pair(val, &p.key("pool_id"))?)
                }
                "category" if !matches!(self.node(val), Node::None) => category = Some(val),
                _ => {}
            }
        }
        let Some(action) = action else {
            return err(p, "trace entry has no `action`");
        };
        let pk = p.key("action");
        let name = self.string(action, &pk)?;
        let action = full(self.intern.action(name), &pk)?;
        let frames = self.stack2(frames, cpp, p)?;
        let compile_context = match compile_context {
            Some(v) => Some(self.str_id(v, &p.key("compile_context"))?),
            None => None,
        };
        let user_metadata = match user_metadata {
            Some(v) => Some(self.str_id(v, &p.key("user_metadata"))?),
            None => None,
        };
        let category = match category {
            Some(v) => Some(self.str_id(v, &p.key("category"))?),
            None => None,
        };
        let pool = match pool_id {
            Some(pair) => Some(full(self.intern.pool(pair), &p.key("pool_id"))?),
            None => None,
        };
        let extras = EventExtras {
            device_free,
            compile_context,
            user_metadata,
            category,
            pool,
        };
        let stream = full(self.intern.stream(stream), &p.key("stream"))?;
        let mut e = TraceEvent::new(action, addr, size, stream, frames).with_time_us(time_us);
        full(self.intern.event_extras(&mut e, extras), p)?;
        Ok(e)
    }

    /// The sink's entry `i` of list `l`, with final ids.
    pub(super) fn record(&mut self, l: u32, i: u32, p: &P) -> R<TraceEvent> {
        self.spend(1, p)?;
        if self.lists[l as usize].is_blocks() {
            return err(p, "a segment's block where a trace entry belongs");
        }
        let SinkList::Kept(evs) = &self.lists[l as usize] else {
            self.needs_entries = true;
            return err(p, "a trace entry read by itself, from a trace only counted");
        };
        let mut e = evs[i as usize].clone();
        if !self.mapped[l as usize] {
            self.map_event(&mut e, p)?;
        }
        Ok(e)
    }

    /// Gives a sink entry's provisional ids their final numbers, interning
    /// in the order [`Cx::event`] would (action, frames, then its extras:
    /// compile context, user metadata, category, pool). The sink takes no
    /// unknown action, and keeps each combination of extras once, so those
    /// are mapped the first time an entry names them.
    #[inline]
    pub(super) fn map_event(&mut self, e: &mut TraceEvent, p: &P) -> R<()> {
        e.frames = match e.frames.0 {
            0 => StackId::EMPTY,
            s => self.pstack(s - 1, &p.key("frames"))?,
        };
        if e.stream != StreamIdx::DEFAULT {
            let i = e.stream.0 as usize - 1;
            e.stream = match self.pstream_ids[i] {
                Some(id) => id,
                None => {
                    let id = full(self.intern.stream(self.pstreams[i]), &p.key("stream"))?;
                    self.pstream_ids[i] = Some(id);
                    id
                }
            };
        }
        if let Some(x) = e.extras() {
            let i = x.0 as usize;
            let id = match self.pextras_ids[i] {
                Some(id) => id,
                None => {
                    let id = self.map_extras(self.pextras[i], p)?;
                    self.pextras_ids[i] = Some(id);
                    id
                }
            };
            e.set_extras(Some(id));
        }
        Ok(())
    }

    /// The final index of a sink combination of extras.
    fn map_extras(&mut self, x: EventExtras, p: &P) -> R<ExtrasIdx> {
        let mut str_id = |s: Option<StrId>, key: &str| match s {
            Some(s) => self.str_id(s.0, &p.key(key)).map(Some),
            None => Ok(None),
        };
        let compile_context = str_id(x.compile_context, "compile_context")?;
        let user_metadata = str_id(x.user_metadata, "user_metadata")?;
        let category = str_id(x.category, "category")?;
        let pool = match x.pool {
            Some(i) => Some(full(
                self.intern.pool(self.ppools[i.0 as usize]),
                &p.key("pool_id"),
            )?),
            None => None,
        };
        let x = EventExtras {
            device_free: x.device_free,
            compile_context,
            user_metadata,
            category,
            pool,
        };
        let id = full(self.intern.extras(x), p)?;
        Ok(id.expect("a sink combination has a field present"))
    }

    /// The sink list whose entries, all of them and in order, are `items`.
    pub(super) fn whole_list(&self, items: &[Vid]) -> Option<u32> {
        let &first = items.first()?;
        let Node::Record(l, 0) = *self.node(first) else {
            return None;
        };
        if self.lists[l as usize].is_blocks() {
            return None;
        }
        if self.lists[l as usize].len() != items.len() {
            return None;
        }
        items
            .iter()
            .enumerate()
            .all(|(j, &v)| matches!(*self.node(v), Node::Record(x, i) if x == l && i as usize == j))
            .then_some(l)
    }

    pub(super) fn annotation(&mut self, v: Vid, p: &P) -> R<Annotation> {
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut a = Annotation::default();
        for &(k, val) in d {
            let key = match self.node(k) {
                Node::Str(s) => &**s,
                _ => continue,
            };
            match key {
                "device" => a.device = Some(self.int(val, &p.key("device"))?),
                "time_us" => a.time_us = Some(self.int(val, &p.key("time_us"))?),
                _ => a
                    .fields
                    .push((key.to_string(), self.setting(val, &p.key(key), 0)?)),
            }
        }
        dedup_keys(&mut a.fields);
        Ok(a)
    }
}

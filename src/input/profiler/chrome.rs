//! `torch.profiler` Chrome traces (`prof.export_chrome_trace(...)`,
//! `tensorboard_trace_handler`'s `.pt.trace.json.gz`): the `[memory]` and
//! `[OutOfMemory]` instant events of every (device type, device id), the
//! allocation timeline they describe and the operator running at each event.
//!
//! Events are recognised by name and `args` keys, never by exact layout:
//! `ph`, `cat` and the `ts` type changed across kineto releases. Two schemas
//! exist in the wild: the current one (`Addr`, `Bytes`, `Total Allocated`,
//! `Total Reserved`, optional `finished`) and the 2021 one with only `Bytes`,
//! where allocated bytes are rebuilt by summing and reserved bytes are
//! unknown.
//!
//! Events of one device are ordered by `ts`, ties kept in file order: events
//! of several threads are interleaved in the file, and only time order makes
//! `Total Allocated` move by exactly `Bytes` at every step (checked, and
//! counted as an anomaly when it does not).

use super::Anomalies;
use crate::input::LoadError;
pub use crate::model::profiler::*;
use serde_json::Value;
use std::collections::HashMap;

/// A Chrome trace: an object with a `traceEvents` array, or the bare array
/// form whose entries carry `ph`.
pub fn is_chrome_trace(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.get("traceEvents").is_some_and(|t| t.is_array()),
        Value::Array(a) => a
            .first()
            .is_some_and(|e| e.get("ph").is_some() && e.get("name").is_some()),
        _ => false,
    }
}

struct Span {
    start: f64,
    end: f64,
    name: u32,
}

#[derive(Default)]
struct ThreadSpans {
    ops: Vec<Span>,
    py: Vec<Span>,
}

fn num_i64(v: Option<&Value>) -> Option<i64> {
    let v = v?;
    v.as_i64()
        .or_else(|| v.as_u64().map(|u| u as i64))
        .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

fn num_f64(v: Option<&Value>) -> Option<f64> {
    v?.as_f64().filter(|f| f.is_finite())
}

fn id_part(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "?".into(),
    }
}

struct Interner {
    map: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.map.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        self.map.insert(s.to_string(), i);
        i
    }
}

/// Decodes a Chrome trace. An error only when it is not one, or when it holds
/// no memory events (recorded without `profile_memory=True`).
pub fn trace_from_json(v: &Value, name: &str) -> Result<ProfilerTrace, LoadError> {
    let events = match v {
        Value::Object(o) => o.get("traceEvents").and_then(|t| t.as_array()),
        Value::Array(a) => Some(a),
        _ => None,
    }
    .ok_or_else(|| LoadError::Format {
        file: name.into(),
        msg: "not a Chrome trace (no traceEvents array)".into(),
    })?;
    let mut r = TraceReader::default();
    events.iter().for_each(|e| r.add(e));
    r.finish(v, name)
}

/// A Chrome trace read event by event, as its `traceEvents` array is
/// parsed: only the memory events and the spans of operators and Python
/// functions are kept, so an event costs its memory only while it is read.
pub struct TraceReader {
    /// Events seen so far (the index of the next).
    count: usize,
    anomalies: Anomalies,
    names: Interner,
    threads: Interner,
    spans: HashMap<u32, ThreadSpans>,
    mem: HashMap<DeviceKey, Vec<MemEvent>>,
    ooms: HashMap<DeviceKey, Vec<(MemEvent, u64)>>,
    op_events: u64,
    memory_events: u64,
}

impl Default for TraceReader {
    fn default() -> Self {
        let interner = || Interner {
            map: HashMap::new(),
            names: Vec::new(),
        };
        TraceReader {
            count: 0,
            anomalies: Anomalies::default(),
            names: interner(),
            threads: interner(),
            spans: HashMap::new(),
            mem: HashMap::new(),
            ooms: HashMap::new(),
            op_events: 0,
            memory_events: 0,
        }
    }
}

impl TraceReader {
    /// The next entry of `traceEvents`, as its JSON text: read only as far
    /// as [`TraceReader::add`] could keep anything of it
    /// ([`super::entry::read`]).
    pub fn add_text(&mut self, text: &str) -> Result<(), serde_json::Error> {
        match super::entry::read(text)? {
            Some(v) => self.add(&v),
            None => self.count += 1,
        }
        Ok(())
    }

    /// The next entry of `traceEvents`.
    pub fn add(&mut self, e: &Value) {
        let i = self.count;
        self.count += 1;
        let Some(obj) = e.as_object() else {
            self.anomalies.add("trace entry that is not an object", || {
                format!("traceEvents[{i}]")
            });
            return;
        };
        let ev_name = obj.get("name").and_then(|n| n.as_str()).unwrap_or("");
        let thread_key = || format!("{}/{}", id_part(obj.get("pid")), id_part(obj.get("tid")));
        let is_mem = ev_name == "[memory]";
        let is_oom = ev_name == "[OutOfMemory]";
        if is_mem || is_oom {
            let Some((key, me)) = memory_event(i, obj, &mut self.threads, &mut self.anomalies)
            else {
                return;
            };
            if is_mem {
                self.memory_events += 1;
                self.mem.entry(key).or_default().push(me);
            } else {
                let bytes = me.bytes.unsigned_abs();
                self.ooms.entry(key).or_default().push((me, bytes));
            }
            return;
        }
        if obj.get("ph").and_then(|p| p.as_str()) != Some("X") {
            return;
        }
        let cat = obj.get("cat").and_then(|c| c.as_str()).unwrap_or("");
        let is_op = cat == "cpu_op" || cat == "Operator";
        let is_py = cat == "python_function" && ev_name.contains(".py(");
        if !(is_op || is_py) {
            return;
        }
        if is_op {
            self.op_events += 1;
        }
        let (Some(ts), Some(dur)) = (num_f64(obj.get("ts")), num_f64(obj.get("dur"))) else {
            return;
        };
        let thread = self.threads.id(&thread_key());
        let span = Span {
            start: ts,
            end: ts + dur.max(0.0),
            name: self.names.id(ev_name),
        };
        let t = self.spans.entry(thread).or_default();
        if is_op { &mut t.ops } else { &mut t.py }.push(span);
    }

    /// The trace, once every entry is read; `v` is the document (its
    /// `traceEvents` aside: `deviceProperties`, `distributedInfo`).
    pub fn finish(mut self, v: &Value, name: &str) -> Result<ProfilerTrace, LoadError> {
        if self.memory_events == 0 && self.ooms.is_empty() {
            return Err(LoadError::Format {
                file: name.into(),
                msg: "a profiler trace without [memory] events: record it with \
                  torch.profiler.profile(profile_memory=True)"
                    .into(),
            });
        }

        attribute(&mut self.mem, &mut self.ooms, &mut self.spans);

        let device_properties = device_properties(v);
        let dist = v.get("distributedInfo");
        let rank = num_i64(dist.and_then(|d| d.get("rank")));
        let world_size = num_i64(dist.and_then(|d| d.get("world_size")));

        let names = self.names.names;
        let devices = build_devices(
            self.mem,
            self.ooms,
            &device_properties,
            &names,
            &mut self.anomalies,
        );

        let gpu_memory_events = devices
            .iter()
            .filter(|d| !d.key.is_cpu())
            .map(|d| d.summary.events)
            .sum();
        Ok(ProfilerTrace {
            trace_events: self.count as u64,
            memory_events: self.memory_events,
            gpu_memory_events,
            op_events: self.op_events,
            devices,
            device_properties,
            rank,
            world_size,
            names,
            threads: self.threads.names,
            anomalies: self.anomalies.into_vec(),
        })
    }
}

/// One `[memory]` or `[OutOfMemory]` entry `traceEvents[i]` as its device
/// and event (operators not yet attributed), its thread interned once it
/// is read; `None`, counted as an anomaly, when a field it needs is
/// missing.
fn memory_event(
    i: usize,
    obj: &serde_json::Map<String, Value>,
    threads: &mut Interner,
    anomalies: &mut Anomalies,
) -> Option<(DeviceKey, MemEvent)> {
    let Some(args) = obj.get("args").and_then(|a| a.as_object()) else {
        anomalies.add("memory event without args", || format!("traceEvents[{i}]"));
        return None;
    };
    let Some(ts) = num_f64(obj.get("ts")) else {
        anomalies.add("memory event without a numeric ts", || {
            format!("traceEvents[{i}].ts")
        });
        return None;
    };
    let Some(bytes) = num_i64(args.get("Bytes")) else {
        anomalies.add("memory event without Bytes", || {
            format!("traceEvents[{i}].args")
        });
        return None;
    };
    let Some(device_type) = num_i64(args.get("Device Type")) else {
        anomalies.add("memory event without Device Type", || {
            format!("traceEvents[{i}].args")
        });
        return None;
    };
    let device_id = num_i64(args.get("Device Id")).unwrap_or(-1);
    let nonneg = |key: &str, anomalies: &mut Anomalies| -> Option<u64> {
        let x = num_i64(args.get(key))?;
        if x < 0 {
            anomalies.add("negative Total Allocated/Reserved", || {
                format!("traceEvents[{i}].args[\"{key}\"] = {x}")
            });
        }
        Some(x.max(0) as u64)
    };
    let total_allocated = nonneg("Total Allocated", anomalies);
    let total_reserved = nonneg("Total Reserved", anomalies);
    let thread = threads.id(&format!(
        "{}/{}",
        id_part(obj.get("pid")),
        id_part(obj.get("tid"))
    ));
    let me = MemEvent {
        index: i as u32,
        ts_us: ts,
        bytes,
        // Pointers are written as signed decimals.
        addr: num_i64(args.get("Addr")).map(|a| a as u64),
        total_allocated,
        total_reserved,
        finished: args.get("finished").and_then(|f| f.as_bool()),
        thread,
        op: None,
        top_op: None,
        python: None,
        pair: None,
    };
    let key = DeviceKey {
        device_type,
        device_id,
    };
    Some((key, me))
}

/// Attribution: every memory event (and OOM) of a thread against that
/// thread's operator and Python spans (the innermost and outermost
/// operator, the innermost Python function).
fn attribute(
    mem: &mut HashMap<DeviceKey, Vec<MemEvent>>,
    ooms: &mut HashMap<DeviceKey, Vec<(MemEvent, u64)>>,
    spans: &mut HashMap<u32, ThreadSpans>,
) {
    let mut queries: HashMap<u32, Vec<(f64, DeviceKey, usize, bool)>> = HashMap::new();
    for (k, v) in mem.iter() {
        for (j, e) in v.iter().enumerate() {
            queries
                .entry(e.thread)
                .or_default()
                .push((e.ts_us, *k, j, false));
        }
    }
    for (k, v) in ooms.iter() {
        for (j, (e, _)) in v.iter().enumerate() {
            queries
                .entry(e.thread)
                .or_default()
                .push((e.ts_us, *k, j, true));
        }
    }
    let mut thread_ids: Vec<u32> = queries.keys().copied().collect();
    thread_ids.sort_unstable();
    for tid in thread_ids {
        let mut q = queries.remove(&tid).unwrap_or_default();
        q.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
        let Some(sp) = spans.get_mut(&tid) else {
            continue;
        };
        let times: Vec<f64> = q.iter().map(|x| x.0).collect();
        let ops = enclosing(&mut sp.ops, &times);
        let py = enclosing(&mut sp.py, &times);
        for (n, (_, key, j, is_oom)) in q.into_iter().enumerate() {
            let e = if is_oom {
                &mut ooms.get_mut(&key).expect("key")[j].0
            } else {
                &mut mem.get_mut(&key).expect("key")[j]
            };
            e.op = ops[n].0;
            e.top_op = ops[n].1;
            e.python = py[n].0;
        }
    }
}

/// The `deviceProperties` of the trace: id, name and memory of each GPU.
fn device_properties(v: &Value) -> Vec<DeviceProperty> {
    v.get("deviceProperties")
        .and_then(|d| d.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some(DeviceProperty {
                        id: num_i64(p.get("id"))?,
                        name: p
                            .get("name")
                            .and_then(|n| n.as_str())
                            .unwrap_or("")
                            .to_string(),
                        total_global_mem: num_i64(p.get("totalGlobalMem")).map(|x| x.max(0) as u64),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// For each time (sorted ascending), the innermost and outermost span that
/// contains it. Spans of one thread nest; a stack sweep finds them in
/// O(n log n). Ends are inclusive: an allocation at an operator's last
/// microsecond still belongs to it.
fn enclosing(spans: &mut [Span], times: &[f64]) -> Vec<(Option<u32>, Option<u32>)> {
    spans.sort_by(|a, b| a.start.total_cmp(&b.start).then(b.end.total_cmp(&a.end)));
    let mut out = Vec::with_capacity(times.len());
    let mut stack: Vec<usize> = Vec::new();
    let mut j = 0;
    for &t in times {
        while j < spans.len() && spans[j].start <= t {
            while stack.last().is_some_and(|&s| spans[s].end < spans[j].start) {
                stack.pop();
            }
            stack.push(j);
            j += 1;
        }
        while stack.last().is_some_and(|&s| spans[s].end < t) {
            stack.pop();
        }
        let inner = stack.last().map(|&s| spans[s].name);
        let outer = stack
            .iter()
            .find(|&&s| spans[s].end >= t)
            .map(|&s| spans[s].name);
        out.push((inner, outer));
    }
    out
}

/// Every device with memory events or OOM records, accelerators first
/// (by type and id), then the CPU; an accelerator with the properties of
/// its id.
fn build_devices(
    mut mem: HashMap<DeviceKey, Vec<MemEvent>>,
    mut ooms: HashMap<DeviceKey, Vec<(MemEvent, u64)>>,
    device_properties: &[DeviceProperty],
    names: &[String],
    anomalies: &mut Anomalies,
) -> Vec<TraceDevice> {
    let mut keys: Vec<DeviceKey> = mem.keys().chain(ooms.keys()).copied().collect();
    keys.sort_by_key(|k| (k.is_cpu(), k.device_type, k.device_id));
    keys.dedup();
    let mut devices = Vec::new();
    for key in keys {
        let evs = mem.remove(&key).unwrap_or_default();
        let oo = ooms.remove(&key).unwrap_or_default();
        let prop = if key.is_cpu() {
            None
        } else {
            device_properties.iter().find(|p| p.id == key.device_id)
        };
        devices.push(build_device(key, evs, oo, prop, names, anomalies));
    }
    devices
}

/// One device of the trace: its events sorted by time and paired, the
/// figures of the whole trace, and its OOM records with their operators.
fn build_device(
    key: DeviceKey,
    mut events: Vec<MemEvent>,
    mut ooms: Vec<(MemEvent, u64)>,
    prop: Option<&DeviceProperty>,
    names: &[String],
    anomalies: &mut Anomalies,
) -> TraceDevice {
    events.sort_by(|a, b| a.ts_us.total_cmp(&b.ts_us).then(a.index.cmp(&b.index)));
    ooms.sort_by(|a, b| {
        a.0.ts_us
            .total_cmp(&b.0.ts_us)
            .then(a.0.index.cmp(&b.0.index))
    });
    let label = key.label();
    let name_of = |id: Option<u32>| id.map(|i| names[i as usize].clone());

    let has_addr = !events.is_empty() && events.iter().all(|e| e.addr.is_some());
    let has_totals = !events.is_empty() && events.iter().all(|e| e.total_allocated.is_some());
    let cached = !key.is_cpu();

    let mut s = DeviceSummary {
        events: events.len() as u64,
        has_addr,
        has_totals,
        ..Default::default()
    };
    pair_events(&mut events, &mut s, anomalies);

    let baseline = allocated_before(&events, &mut s);

    check_totals(&label, &events, baseline, cached && has_totals, anomalies);
    s.add_figures(&events, cached && has_totals, names);

    s.out_of_memory_events = ooms.len() as u64;
    let ooms = ooms
        .into_iter()
        .map(|(e, bytes)| TraceOom {
            index: e.index,
            ts_us: e.ts_us,
            bytes,
            total_allocated: e.total_allocated,
            total_reserved: e.total_reserved,
            op: name_of(e.op),
            python: name_of(e.python),
        })
        .collect();

    TraceDevice {
        key,
        label,
        name: prop.map(|p| p.name.clone()).filter(|n| !n.is_empty()),
        capacity: prop.and_then(|p| p.total_global_mem),
        events,
        ooms,
        summary: s,
    }
}

/// Pairs allocations with frees by address (`MemEvent::pair`), counting in
/// `s` the allocations, the frees, the frees of memory older than the trace
/// and, with `Addr`, what is still live at the end.
fn pair_events(events: &mut [MemEvent], s: &mut DeviceSummary, anomalies: &mut Anomalies) {
    let mut live: HashMap<u64, usize> = HashMap::new();
    for i in 0..events.len() {
        let e = &events[i];
        match e.bytes.signum() {
            1 => s.allocations += 1,
            -1 => s.frees += 1,
            _ => anomalies.add("memory event of 0 bytes", || {
                format!("traceEvents[{}].args", e.index)
            }),
        }
        let Some(addr) = e.addr else { continue };
        if e.bytes > 0 {
            if let Some(old) = live.insert(addr, i) {
                let idx = events[old].index;
                anomalies.add("allocation at an address that is already live", || {
                    format!(
                        "traceEvents[{}] reuses address {addr:#x} of traceEvents[{idx}] with no free between",
                        e.index
                    )
                });
            }
        } else if e.bytes < 0 {
            match live.remove(&addr) {
                Some(a) => {
                    if events[a].bytes != -e.bytes {
                        let (a_idx, ab, fi, fb) =
                            (events[a].index, events[a].bytes, e.index, e.bytes);
                        anomalies.add("free of a different size than its allocation", || {
                            format!(
                                "traceEvents[{fi}] frees {} bytes at {addr:#x}, allocated as {ab} bytes by traceEvents[{a_idx}]",
                                -fb
                            )
                        });
                    }
                    events[a].pair = Some(i as u32);
                    events[i].pair = Some(a as u32);
                }
                None => {
                    s.frees_before_trace += 1;
                    s.frees_before_trace_bytes += e.bytes.unsigned_abs();
                }
            }
        }
    }
    if s.has_addr {
        s.live_at_end = Some(live.len() as u64);
        s.live_at_end_bytes = Some(live.values().map(|&i| events[i].bytes as u64).sum());
    }
}

/// Allocated bytes before the first event: what its `Total Allocated`
/// says it found, or (2021 schema) a lower bound, the largest deficit of
/// frees over allocations; recorded in `s`.
fn allocated_before(events: &[MemEvent], s: &mut DeviceSummary) -> u64 {
    let mut prefix: i128 = 0;
    let mut min_prefix: i128 = 0;
    for e in events {
        prefix += e.bytes as i128;
        min_prefix = min_prefix.min(prefix);
    }
    let baseline: u64 = match events.first() {
        Some(f) if f.total_allocated.is_some() => {
            (f.total_allocated.unwrap_or(0) as i128 - f.bytes as i128).max(0) as u64
        }
        _ => {
            s.allocated_before_is_lower_bound = true;
            (-min_prefix).max(0) as u64
        }
    };
    s.allocated_before_trace = baseline;
    baseline
}

/// Counts the totals no allocator could have reported: `Total Allocated`
/// moving by another amount than `Bytes`, allocated above reserved.
fn check_totals(
    label: &str,
    events: &[MemEvent],
    baseline: u64,
    reserved: bool,
    anomalies: &mut Anomalies,
) {
    let mut prev_total: Option<u64> = None;
    for (e, x) in events.iter().zip(totals(events, baseline, reserved)) {
        if let Some(t) = e.total_allocated {
            if let Some(p) = prev_total
                && t as i128 - p as i128 != e.bytes as i128
            {
                anomalies.add(
                    "Total Allocated moved by a different amount than Bytes",
                    || {
                        format!(
                            "{label}: traceEvents[{}]: Total Allocated went from {p} to {t} with Bytes = {}",
                            e.index, e.bytes
                        )
                    },
                );
            }
            prev_total = Some(t);
        }
        if let Some(r) = x.reserved
            && x.allocated > r
        {
            anomalies.add("Total Allocated above Total Reserved", || {
                format!(
                    "{label}: traceEvents[{}]: allocated {} > reserved {r}",
                    e.index, x.allocated
                )
            });
        }
    }
}

/// The call site of a memory event. Outside every operator (graph capture,
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mem(ts: f64, tid: i64, bytes: i64, addr: i64, ta: i64, tr: i64) -> Value {
        json!({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
               "pid": 1, "tid": tid, "ts": ts,
               "args": {"Addr": addr, "Bytes": bytes, "Total Allocated": ta,
                        "Total Reserved": tr, "Device Type": 1, "Device Id": 0}})
    }

    fn op(name: &str, ts: f64, dur: f64, tid: i64) -> Value {
        json!({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur})
    }

    #[test]
    fn timeline_peaks_and_attribution() {
        let doc = json!({"traceEvents": [
            op("aten::linear", 0.0, 100.0, 7),
            op("aten::addmm", 10.0, 20.0, 7),
            op("aten::empty", 50.0, 5.0, 7),
            // Out of time order in the file, as in multi-threaded traces.
            mem(52.0, 7, 1024, 0x2000, 1536, 4096),
            mem(12.0, 7, 512, 0x1000, 512, 2048),
            mem(60.0, 7, -512, 0x1000, 1024, 4096),
            mem(200.0, 7, -1024, 0x2000, 0, 4096),
            mem(210.0, 7, -256, 0x9000, 0, 4096),
        ]});
        assert!(is_chrome_trace(&doc));
        let t = trace_from_json(&doc, "t.json").unwrap();
        assert_eq!(t.devices.len(), 1);
        let d = &t.devices[0];
        assert_eq!(d.label, "cuda:0");
        assert_eq!(d.summary.events, 5);
        assert_eq!(d.summary.allocations, 2);
        assert_eq!(d.summary.frees, 3);
        // Sorted by time: 512 at t=12 comes first.
        assert_eq!(d.events[0].bytes, 512);
        assert_eq!(t.name(d.events[0].op.unwrap()), "aten::addmm");
        assert_eq!(t.name(d.events[0].top_op.unwrap()), "aten::linear");
        assert_eq!(t.name(d.events[1].op.unwrap()), "aten::empty");
        assert_eq!(d.events[3].op, None);
        let p = d.summary.peak_allocated.as_ref().unwrap();
        assert_eq!((p.bytes, p.event), (1536, Some(1)));
        assert_eq!(p.op.as_deref(), Some("aten::empty"));
        let r = d.summary.peak_reserved.as_ref().unwrap();
        assert_eq!((r.bytes, r.event), (4096, Some(1)));
        let g = d.summary.peak_external_free.as_ref().unwrap();
        assert_eq!(g.bytes, 4096);
        assert_eq!(d.summary.reserved_growth.len(), 1);
        assert_eq!(d.summary.reserved_growth[0].free_before, 2048 - 512);
        assert_eq!(d.summary.growth_with_free_cache, 1);
        assert_eq!(d.summary.frees_before_trace, 1);
        assert_eq!(d.summary.live_at_end, Some(0));
        assert_eq!(d.summary.allocated_before_trace, 0);
        // The stray free of 256 bytes made Total Allocated disagree.
        assert_eq!(t.anomalies.len(), 1);
        assert_eq!(
            t.anomalies[0].kind,
            "Total Allocated moved by a different amount than Bytes"
        );
        // Event 2 frees event 0's allocation; event 1's outlives it.
        assert!(d.events[2].bytes < 0);
        assert_eq!(d.events[0].pair, Some(2));
        assert!(d.events[1].pair.is_none_or(|p| p > 2));
        // The totals after each of the five events.
        assert_eq!(d.totals().count(), 5);
        assert_eq!(
            d.totals().nth(1).and_then(|x| x.external_free()),
            Some(4096 - 1536)
        );
    }

    #[test]
    fn operators_are_charged_for_what_they_allocated() {
        let doc = json!({"traceEvents": [
            op("aten::empty", 0.0, 10.0, 7),
            op("aten::zeros", 20.0, 10.0, 7),
            mem(1.0, 7, 1024, 0x1000, 1024, 4096),
            mem(2.0, 7, 0, 0x1800, 1024, 4096),
            mem(21.0, 7, 512, 0x2000, 1536, 4096),
            mem(40.0, 7, -1024, 0x1000, 512, 4096),
            mem(41.0, 7, 256, 0x3000, 768, 4096),
        ]});
        let t = trace_from_json(&doc, "t.json").unwrap();
        let d = &t.devices[0];
        // The free of 0x1000 is charged to aten::empty, which allocated it;
        // the zero-byte event counts as nothing.
        let shares = |at| -> Vec<(String, u64, u64)> {
            d.live_by_op(&t.names, at)
                .unwrap()
                .into_iter()
                .map(|s| (s.op, s.bytes, s.events))
                .collect()
        };
        assert_eq!(
            shares(Some(2)),
            vec![
                ("aten::empty".to_string(), 1024, 1),
                ("aten::zeros".to_string(), 512, 1)
            ]
        );
        let at_end = shares(Some(4));
        assert_eq!(at_end[0], ("aten::zeros".to_string(), 512, 1));
        // End figures: live bytes agree with the shares at the last event,
        // and the peak of aten::empty outlives its free.
        let figures = d.op_figures(&t.names).unwrap();
        for (op, live, _, n) in &figures {
            let share = at_end.iter().find(|s| &s.0 == op);
            assert_eq!(share.map_or((0, 0), |s| (s.1, s.2)), (*live, *n), "{op}");
        }
        let empty = figures.iter().find(|f| f.0 == "aten::empty").unwrap();
        assert_eq!((empty.1, empty.2, empty.3), (0, 1024, 0));
    }

    #[test]
    fn bytes_only_schema_rebuilds_allocated_from_a_lower_bound() {
        let ev = |ts: i64, b: i64| {
            json!({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                   "args": {"Device Type": 1, "Device Id": 0, "Bytes": b}})
        };
        let doc = json!({"traceEvents": [ev(1, -100), ev(2, 300), ev(3, -50)]});
        let t = trace_from_json(&doc, "old.json").unwrap();
        let d = &t.devices[0];
        assert!(!d.summary.has_totals && !d.summary.has_addr);
        assert!(d.summary.allocated_before_is_lower_bound);
        assert_eq!(d.summary.allocated_before_trace, 100);
        assert_eq!(d.summary.peak_allocated.as_ref().unwrap().bytes, 300);
        assert_eq!(d.summary.allocated_end, 250);
        assert!(d.summary.peak_reserved.is_none());
        assert!(d.totals().all(|x| x.reserved.is_none()));
    }

    #[test]
    fn out_of_memory_events_and_cpu_devices() {
        let doc = json!([
            {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1.5,
             "args": {"Device Type": 0, "Device Id": -1, "Addr": 5, "Bytes": 16,
                      "Total Allocated": 16, "Total Reserved": 0}},
            {"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 1, "ts": 2.0,
             "args": {"Device Type": 6, "Device Id": 1, "Bytes": 1 << 30,
                      "Total Allocated": 10, "Total Reserved": 20}}
        ]);
        assert!(is_chrome_trace(&doc));
        let t = trace_from_json(&doc, "x.json").unwrap();
        assert_eq!(t.devices.len(), 2);
        assert_eq!(t.devices[0].label, "hip:1");
        assert_eq!(t.devices[0].ooms.len(), 1);
        assert_eq!(t.devices[0].ooms[0].bytes, 1 << 30);
        assert_eq!(t.devices[0].ooms[0].total_reserved, Some(20));
        assert_eq!(t.devices[1].label, "cpu");
        // CPU memory has no cache: no reserved figure.
        assert_eq!(t.devices[1].totals().last().and_then(|x| x.reserved), None);
    }

    #[test]
    fn a_trace_without_memory_events_is_a_clear_error() {
        let doc = json!({"traceEvents": [op("aten::mm", 0.0, 1.0, 1)]});
        let e = trace_from_json(&doc, "cpu.json").unwrap_err().to_string();
        assert!(e.contains("profile_memory=True"), "{e}");
    }

    #[test]
    fn snapshot_json_is_not_a_trace() {
        assert!(!is_chrome_trace(
            &json!([{"address": 1, "total_size": 2, "blocks": []}])
        ));
        assert!(!is_chrome_trace(&json!({"segments": []})));
    }
}

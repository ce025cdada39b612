use super::reading::*;
use super::*;

const GIB: f64 = 1073741824.0;
const MIB: f64 = 1048576.0;

#[test]
fn sizes_use_binary_units() {
    assert_eq!(size("12.50", "MiB"), Some((12.5 * MIB) as u64));
    assert_eq!(size("1062", "MB"), Some(1062 << 20));
    assert_eq!(size("0", "bytes"), Some(0));
    assert_eq!(size("1.5", "GiB"), Some((1.5 * GIB) as u64));
}

#[test]
fn wrapped_and_prefixed_current_message() {
    let t = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capac\n\
             ity of 79.10 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 17.00 GiB is reserved by PyTorch but unallocated.\n";
    let p = parse(t).unwrap();
    assert_eq!(p.messages.len(), 1);
    let m = &p.messages[0];
    assert_eq!(m.wording, Wording::Current);
    assert_eq!(m.device, Some(3));
    assert_eq!(m.capacity, size("79.10", "GiB"));
    assert_eq!(m.reserved, Some((77.0 * GIB) as u64));
    assert_eq!(m.this_process(), Some((78.0 * GIB) as u64));
    assert_eq!(m.other_processes(), Some(0));
    let e = explain(&Style::default(), t).unwrap();
    assert_eq!(
        e.items[0].diagnosis.cause,
        crate::analysis::advice::Cause::Fragmentation
    );
}

#[test]
fn old_releases_do_not_get_settings_they_lack() {
    let t = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.90 GiB total capacity; 10.00 GiB already allocated; 100.00 MiB free; 14.00 GiB reserved in total by PyTorch)";
    let e = explain(&Style::default(), t).unwrap();
    assert_eq!(e.parsed.messages[0].wording, Wording::ReservedInTotal);
    let s = &e.items[0].diagnosis.suggestions;
    assert!(
        s.iter()
            .filter(|s| s.what.contains("expandable_segments") || s.what.contains("max_split"))
            .all(|s| !s.applies && s.why.starts_with("needs PyTorch"))
    );
}

#[test]
fn runtime_errors_and_nonsense() {
    let e = explain(&Style::default(), "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported").unwrap();
    assert_eq!(e.parsed.messages[0].wording, Wording::RuntimeError);
    assert_eq!(
        explain(&Style::default(), "hello world").unwrap_err(),
        ExplainError::NothingRecognised
    );
}

#[test]
fn rare_wordings() {
    let p = parse(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
    )
    .unwrap();
    assert_eq!(p.messages[0].wording, Wording::MoreThan1Eb);
    assert_eq!(p.messages[0].tried, None);
    let p = parse(
        "torch.OutOfMemoryError: CUDA out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: 2.00 GiB",
    )
    .unwrap();
    assert_eq!(p.messages[0].wording, Wording::FractionRejection);
    assert_eq!(p.messages[0].requested, Some(2 << 30));
    // Two records glued on one line by a progress bar.
    let p = parse("CUDA out of memory. Tried to allocate 2.00 MiB (GPU 1; 1.00 GiB total capacity; 10.00 MiB already allocated; 0 bytes free; 20.00 MiB cached) 50%|### CUDA out of memory. Tried to allocate 4.00 MiB (GPU 1; 1.00 GiB total capacity; 10.00 MiB already allocated; 0 bytes free; 20.00 MiB cached)").unwrap();
    assert_eq!(p.messages.len(), 2);
    assert_eq!(p.messages[1].tried, Some(4 << 20));
    assert_eq!(p.messages[1].device, Some(1));
}

#[test]
fn newest_hint_variable_is_kept_in_suggestions() {
    let t = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 80.00 GiB of which 1.00 GiB is free. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 10.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
    let e = explain(&Style::default(), t).unwrap();
    assert!(
        e.items[0].diagnosis.suggestions[0]
            .what
            .starts_with("PYTORCH_ALLOC_CONF=")
    );
}

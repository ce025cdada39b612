//! A page's bands gathered one lifetime at a time, as a written page
//! gathers them, against the bands chosen from every lifetime at once.

use fragscope::input::{Content, load_bytes};
use fragscope::render::view::PageStacks;
use fragscope::render::view::bands::{Chosen, Tiers};
use fragscope::synth::{Shape, SynthOptions, generate, write_pickle};
use fragscope::timeline::Replayer;

/// A written page gathers a device's lifetimes as the replay knows each
/// whole, out of allocation order; its bands are those chosen from all of
/// them at once, the same bytes, tier by tier.
#[test]
fn bands_gathered_in_any_order_are_those_of_every_lifetime() {
    for shape in [Shape::Narrow, Shape::Fragmented] {
        let o = SynthOptions {
            events: 20_000,
            seed: 3,
            shape,
            ..SynthOptions::default()
        };
        let mut bytes = Vec::new();
        write_pickle(&generate(&o), &mut bytes).unwrap();
        let l = load_bytes(&bytes, "s.pickle").unwrap();
        let Content::Snapshot(snap) = &l.content else {
            panic!("a snapshot")
        };
        let replays = fragscope::timeline::replay(snap);
        let r = replays.iter().find(|r| r.samples.len() > 1000).unwrap();
        let replayer = Replayer::new(snap, r.device);
        let lives = replayer.lifetimes();
        let mut streamed = Vec::new();
        replayer.each_lifetime(|i, l| streamed.push((i, l)));
        let in_order = streamed.windows(2).all(|w| w[0].0 < w[1].0);
        assert!(!in_order, "{shape:?}: lifetimes come as they end");
        streamed.sort_by_key(|x| x.0);
        assert_eq!(streamed.len(), lives.len(), "{shape:?}");
        assert!(
            (streamed.iter().enumerate()).all(|(k, (i, l))| k == *i && lives[*i] == *l),
            "{shape:?}: each lifetime once, as the whole list has it"
        );

        // Kept compact, as a served page keeps them, each reads back the
        // same.
        let kept = replayer.kept_lifetimes();
        assert_eq!(kept.len(), lives.len(), "{shape:?}");
        assert!(
            (0..kept.len()).all(|i| kept.get(i) == lives[i]),
            "{shape:?}"
        );

        let series = &r.samples;
        // The bands and the page's list of the stacks they name.
        let page = |c: Chosen| {
            let stacks = PageStacks::new(snap);
            let t = Tiers {
                stacks: &stacks,
                series,
                chosen: c,
            };
            let mut v = serde_json::to_value(&t).unwrap();
            v["stacks"] = serde_json::to_value(&stacks).unwrap();
            v
        };
        for budget in [0, 300_000, 6 << 20] {
            let all = Chosen::new(series.len(), budget, usize::MAX).of_all(&kept);
            let mut gathered = Chosen::new(series.len(), budget, usize::MAX);
            replayer.each_lifetime(|i, l| gathered.add(i, &l));
            let (want, got) = (page(all), page(gathered));
            assert_eq!(want, got, "{shape:?}, budget {budget}");
            let tiers = want["tiers"].as_array().unwrap();
            assert_eq!(tiers.len() == 1, budget == 0, "{shape:?}, budget {budget}");
            // Tier 0 draws the largest allocation of the whole trace.
            let bands = tiers[0][0]["bands"].as_array().unwrap();
            let largest = bands.iter().map(|b| b[2].as_u64().unwrap()).max();
            let live = lives
                .iter()
                .filter(|l| l.alloc() != l.end() || l.alloc().is_none());
            assert_eq!(largest, live.map(|l| l.size).max(), "{shape:?}");
        }
    }
}

/// On every real trace, each device's lifetimes kept compact read back as
/// the whole list has them, those older than the trace (kept whole) too.
#[test]
fn kept_lifetimes_read_back_on_real_files() {
    let (mut lifetimes, mut older) = (0, 0);
    let present = crate::util::each_real_snapshot(true, |name, snap, _| {
        for d in snap.devices() {
            let replayer = Replayer::new(snap, d);
            let (all, kept) = (replayer.lifetimes(), replayer.kept_lifetimes());
            assert_eq!(kept.len(), all.len(), "{name} device {d}");
            for (i, l) in all.iter().enumerate() {
                assert_eq!(kept.get(i), *l, "{name} device {d} lifetime {i}");
                assert_eq!(kept.events(i), (l.alloc(), l.end()), "{name}");
                assert_eq!(kept.size(i), l.size, "{name}");
            }
            lifetimes += all.len();
            older += all.iter().filter(|l| l.alloc().is_none()).count();
        }
    });
    if !present {
        return;
    }
    assert!(
        lifetimes > 10_000 && older > 0,
        "{lifetimes} lifetimes, {older} older"
    );
}

//! The XDP program against the host parser, on the same frames, through BPF_PROG_TEST_RUN:
//! per frame the whole PacketSummary, and over all frames the map counters (classes, flows,
//! PFC) against the offline engine. Root only (CI runs it).

use analyzer::capture::kernel::load::{LoadOptions, load, program_fd};
use analyzer::capture::kernel::snapshot::{AyaMaps, MapSource};
use analyzer::capture::kernel::test_run::{pin_to_cpu, test_run};
use analyzer::engine::live::{Clock, LiveAccount};
use analyzer::engine::{Engine, FlowStats};
use analyzer::frames::FrameMeta;
use analyzer_common::maps::{MAP_SCRATCH, PROGRAM, Scratch};
use analyzer_common::{PacketSummary, classify};
use aya::maps::PerCpuArray;
use tests::fixtures;
use tests::netns::privileged;

const XDP_PASS: u32 = 2;

/// Flow counters without what differs by nature between kernel and file (time, sources).
fn comparable(s: &FlowStats) -> FlowStats {
    let mut s = s.clone();
    s.first_ns = 0;
    s.last_ns = 0;
    s.sources = 0;
    s.first_event_ns = 0;
    s.opcodes = s.opcodes.in_order();
    s.dscp = s.dscp.in_order();
    s.pcp = s.pcp.in_order();
    s
}

#[test]
fn kernel_classifies_every_fixture_frame_like_the_host() {
    if !privileged("kernel_classifies_every_fixture_frame_like_the_host") {
        return;
    }
    let (frames, filtered) = kernel_equals_host(None);
    assert!(frames > 300 && filtered == 0, "{frames} frames, {filtered} filtered");
}

/// `--filter` in the kernel leaves out the frames the host leaves out, term by term: the
/// counts, flows and PFC senders of what it admits are the host's, and so is the count of
/// what it does not.
#[test]
fn kernel_filters_every_fixture_frame_like_the_host() {
    if !privileged("kernel_filters_every_fixture_frame_like_the_host") {
        return;
    }
    for expr in [
        "src=10.0.0.0/24|10.0.1.1",
        "dst=10.0.0.2,dscp=26",
        "host=fd00::/8|10.0.2.0/24",
        "qp=0x110|0x700|256",
        "pcp=3 vlan=100|none",
        "vlan=100|200",
        "origin=192.0.2.0/30",
        "dscp=24-27,prio=0-7",
    ] {
        let (frames, filtered) = kernel_equals_host(Some(expr));
        assert!(
            frames > 0 && filtered > 0,
            "{expr}: {frames} frames admitted, {filtered} left out: a filter that selects"
        );
    }
}

/// Every fixture's frames (cooked captures left out: XDP never sees a frame without an
/// Ethernet header), by fixture name.
fn fixture_frames() -> Vec<(String, Vec<Vec<u8>>)> {
    fixtures::all()
        .into_iter()
        .filter(|f| !matches!(f.name, "sll.pcap" | "sll2.pcap"))
        .map(|f| (f.name.to_string(), f.frames.into_iter().map(|x| x.record.data).collect()))
        .collect()
}

/// Every fixture frame through the XDP program and the host, with the same `--filter`
/// ([`frames_equal_host`]).
fn kernel_equals_host(filter: Option<&str>) -> (u64, u64) {
    frames_equal_host(filter, &fixture_frames())
}

/// Frames through the XDP program (BPF_PROG_TEST_RUN) and the host, with the same `--filter`:
/// per frame the summary, then the maps against the host's engine. Returns the frames
/// admitted and left out.
fn frames_equal_host(filter: Option<&str>, inputs: &[(String, Vec<Vec<u8>>)]) -> (u64, u64) {
    pin_to_cpu(0).expect("pin to CPU 0");
    let spec = filter.map(|f| analyzer::frames::filter::FilterSpec::parse(f).unwrap());
    let opts = LoadOptions { filter: spec.as_ref().map(|s| s.filter), ..LoadOptions::default() };
    let mut ebpf = load(opts, &[PROGRAM]).expect("load the XDP program");
    let scratch: PerCpuArray<_, Scratch> =
        PerCpuArray::try_from(ebpf.map(MAP_SCRATCH).expect("scratch map")).expect("scratch map type");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    // The host as offline: copies of one frame from two mirror origins count once there and
    // in the kernel (its sightings map).
    let config = analyzer::analyses::Config { filter: spec, ..Default::default() };
    let mut host = analyzer::pipeline::Pipeline::new(config);
    host.engine.add_source("pcap", "fixtures", "fixtures");
    for (name, frames) in inputs {
        for (i, data) in frames.iter().enumerate() {
            let mut out = vec![0u8; data.len()];
            let r = test_run(fd, data, 1, Some(&mut out)).unwrap_or_else(|e| panic!("{name} frame {}: {e}", i + 1));
            assert_eq!(r.retval, XDP_PASS, "{name} frame {}: always XDP_PASS", i + 1);
            assert_eq!(&out, data, "{name} frame {}: the frame is not modified", i + 1);
            let kernel = scratch.get(&0, 0).unwrap()[0].summary;
            let mut want = PacketSummary::zeroed();
            classify(&data[..], data.len() as u32, &mut want);
            assert_eq!(kernel, want, "{name} frame {}: kernel and host summaries differ", i + 1);
            host.observe(FrameMeta { ts_ns: 0, source: 0 }, &want);
        }
    }
    host.finish();
    let host = &host.engine;

    // `scratch` borrows `ebpf`; its last use is above, so the maps can now be taken.
    let mut maps = AyaMaps::new(&mut ebpf).unwrap();
    let snap = maps.snapshot().unwrap();
    let mut kernel = Engine::new();
    kernel.add_source("live", "test", "test");
    LiveAccount::new(0).apply(&mut kernel, &snap, &Clock::now());
    let what = filter.unwrap_or("no filter");
    assert_eq!(kernel.classes, host.classes, "{what}: frame classes");
    assert_eq!(kernel.filtered, host.filtered, "{what}: frames left out");
    assert!(kernel.dropped.values().all(|n| *n == 0), "no loss: {:?}", kernel.dropped);
    // The kernel counts BTH-cut frames; the bytes they needed are known offline only.
    // Which CPUs ran the frames is the kernel's alone (the test may move between CPUs).
    let host_vis = analyzer::engine::Visibility {
        bth_needs: 0,
        several_cpus: kernel.visibility.several_cpus,
        ..host.visibility.clone()
    };
    assert_eq!(kernel.visibility, host_vis, "{what}: encapsulated / cut frames");
    assert_eq!(kernel.flows.len(), host.flows.len(), "{what}: flows");
    for (k, s) in host.flows.iter() {
        let got = kernel.flows.get(k).unwrap_or_else(|| panic!("flow {k:?} missing in the kernel map"));
        assert_eq!(comparable(got), comparable(s), "{what}: flow {k:?}");
    }
    let strip = |t: &analyzer::engine::PfcTable| {
        let f = |c: &analyzer::engine::pfc::PauseCounters| (c.frames, c.xoff, c.xon, c.quanta);
        (
            t.pfc_frames,
            t.pause_frames,
            t.pfc.iter().map(|(k, c)| (*k, f(c))).collect::<Vec<_>>(),
            t.pause.iter().map(|(k, c)| (*k, f(c))).collect::<Vec<_>>(),
        )
    };
    assert_eq!(strip(&kernel.pfc), strip(&host.pfc), "{what}: PFC / PAUSE per sender and priority");
    (host.frames, host.filtered)
}

/// One flow that takes every path a flow's entry has no room for, and its reverse flow: more
/// opcodes than the entry's slots, DSCPs and PCPs other than its first, every ECN codepoint,
/// a PSN skip, duplicates, a READ RESPONSE out of sequence and NAKs of several kinds. The
/// kernel's entry and extra map add up to the host's counts.
#[test]
fn a_flow_past_its_entrys_room_counts_like_the_host() {
    use analyzer_common::opcode::op;
    use analyzer_common::wire::ext::{Aeth, Reth};
    use tests::synth::{Roce, Vlan};
    if !privileged("a_flow_past_its_entrys_room_counts_like_the_host") {
        return;
    }
    let (a, b) = ([10, 9, 0, 1], [10, 9, 0, 2]);
    let req = |opcode: u8, psn: u32| Roce::v4(a, b, 49152, opcode, 0x321, psn).payload(256);
    let mut frames = Vec::new();
    // Ten opcodes of one flow, with advancing PSNs.
    let ops = [
        op::SEND_FIRST,
        op::SEND_MIDDLE,
        op::SEND_LAST,
        op::SEND_ONLY,
        op::RDMA_WRITE_FIRST,
        op::RDMA_WRITE_MIDDLE,
        op::RDMA_WRITE_LAST,
        op::RDMA_WRITE_ONLY,
        op::SEND_ONLY_WITH_IMMEDIATE,
        op::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    ];
    for (i, o) in ops.iter().enumerate() {
        let mut f = req(*o, 100 + i as u32);
        f.ecn = (i % 4) as u8;
        f.dscp = if i % 3 == 0 { 26 } else { 46 };
        if i % 2 == 1 {
            f.vlans = vec![Vlan::dot1q(i as u8 % 8, 10)];
        }
        frames.push(f.build());
    }
    // A PSN skip (110 lost), duplicates of 105 and 106, a READ (RETH) after them.
    for psn in [111, 105, 106] {
        frames.push(req(op::RDMA_WRITE_MIDDLE, psn).build());
    }
    let mut read = req(op::RDMA_READ_REQUEST, 112);
    read.ext.reth = Reth { va: 0x1000, rkey: 7, dma_len: 1024 };
    frames.push(read.build());
    // The reverse flow: a READ RESPONSE with a gap, ACKs and NAKs.
    let resp = |opcode: u8, psn: u32| Roce::v4(b, a, 49153, opcode, 0x123, psn).payload(256);
    for (o, psn) in [(op::RDMA_READ_RESPONSE_FIRST, 112), (op::RDMA_READ_RESPONSE_MIDDLE, 114)] {
        let mut f = resp(o, psn);
        f.ext.aeth = Aeth { syndrome: 0, msn: 1 };
        frames.push(f.build());
    }
    for syndrome in [0x00, 0x60, 0x61, 0x20, 0x62, 0x00] {
        let mut f = resp(op::ACKNOWLEDGE, 100).payload(0);
        f.ext.aeth = Aeth { syndrome, msn: 2 };
        frames.push(f.build());
    }
    frames_equal_host(None, &[("one busy connection".to_string(), frames)]);
}

/// More (sender, priority) pairs than a CPU's PFC slots ([`analyzer_common::maps::PFC_SLOTS`]):
/// 40 senders pausing all 8 priorities (some resuming) and 10 sending 802.3x PAUSE, several
/// frames each. The pairs that took a slot and those the hash map holds add up, per pair, to
/// the host's counts; both paths are taken (the hash map holds the pairs the slots did not).
#[test]
fn pfc_pairs_past_the_slots_count_like_the_host() {
    use analyzer_common::maps::{MAP_PFC, MAP_PFC_SLOTS, PFC_SLOTS, PfcCounters, PfcKey, PfcSlot};
    if !privileged("pfc_pairs_past_the_slots_count_like_the_host") {
        return;
    }
    let mut frames = Vec::new();
    for sender in 0..40u8 {
        for n in 0..=(sender % 3) {
            let quanta: [u16; 8] =
                std::array::from_fn(|p| if (p as u8 + n).is_multiple_of(4) { 0 } else { 100 * (p as u16 + 1) });
            frames.push(tests::synth::pfc([2, 0, 0, 1, 0, sender], 0xff, quanta));
        }
    }
    for sender in 0..10u8 {
        frames.push(tests::synth::pause([2, 0, 0, 2, 0, sender], 0xffff));
    }
    frames_equal_host(None, &[("PFC pairs past the slots".to_string(), frames.clone())]);

    // The same frames again, the two maps read apart.
    pin_to_cpu(0).unwrap();
    let ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    for f in &frames {
        test_run(fd, f, 1, None).unwrap();
    }
    let slots: PerCpuArray<_, PfcSlot> = PerCpuArray::try_from(ebpf.map(MAP_PFC_SLOTS).unwrap()).unwrap();
    let in_slots = (0..PFC_SLOTS).filter(|i| slots.get(i, 0).unwrap()[0].key != 0).count();
    let hash: aya::maps::PerCpuHashMap<_, PfcKey, PfcCounters> =
        aya::maps::PerCpuHashMap::try_from(ebpf.map(MAP_PFC).unwrap()).unwrap();
    let in_hash = hash.keys().count();
    let pairs = 40 * 8 + 10;
    assert!(in_slots > PFC_SLOTS as usize / 2 && in_slots <= PFC_SLOTS as usize, "{in_slots} pairs in slots");
    assert_eq!(in_slots + in_hash, pairs, "{in_slots} pairs in slots, {in_hash} in the hash map");
}

/// The kernel's table of mirrored frames sighted: frames of a flow whose PSNs are a table's
/// buckets apart share a bucket, and the fifth new one within the match window takes the slot
/// of the first (counted). Another origin's copy of the fifth is then a copy, of the first a
/// frame (which takes the second's slot, counted too). (Offline, holding every frame for the window, matches both: the kernel says how
/// many sightings it gave up.)
#[test]
fn sightings_given_up_for_room_are_counted() {
    use analyzer_common::maps::counter;
    use analyzer_common::opcode::op;
    use analyzer_common::vantage::{SIGHT_BUCKETS, SIGHT_WAYS, origin_bit};
    use tests::synth::{Encap, Roce, mirror_from};
    if !privileged("sightings_given_up_for_room_are_counted") {
        return;
    }
    let frame =
        |psn: u32| Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, op::RDMA_WRITE_MIDDLE, 0x77, psn).payload(64).build();
    let copy = |origin: u8, psn: u32| mirror_from([192, 0, 2, origin], 5, Encap::ErspanII, &frame(psn), None);
    let bit = |f: &[u8]| {
        let mut s = PacketSummary::zeroed();
        classify(f, f.len() as u32, &mut s);
        origin_bit(&s)
    };
    assert_ne!(bit(&copy(1, 0)), bit(&copy(2, 0)), "the two origins are told apart");
    pin_to_cpu(0).unwrap();
    let mut ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    let psns: Vec<u32> = (0..=SIGHT_WAYS).map(|k| 100 + k * SIGHT_BUCKETS).collect();
    let frames = psns
        .iter()
        .map(|&p| copy(1, p))
        .chain([copy(2, psns[SIGHT_WAYS as usize]), copy(2, psns[0])])
        .collect::<Vec<_>>();
    for f in &frames {
        assert_eq!(test_run(fd, f, 1, None).unwrap().retval, XDP_PASS);
    }
    let snap = AyaMaps::new(&mut ebpf).unwrap().snapshot().unwrap();
    assert_eq!(snap.counter(counter::ENCAPSULATED), 7);
    // The first frame's sighting for the fifth's; then the second's for the first frame's
    // late copy, a frame not sighted now.
    assert_eq!(snap.counter(counter::SIGHTINGS_EVICTED), 2, "sightings given up within the window");
    assert_eq!(snap.counter(counter::MATCHED_COPIES), 1, "the fifth frame's second copy");
    let roce = snap.counter(analyzer_common::FrameClass::Roce as u32);
    assert_eq!(roce, 7, "every copy is a RoCE frame");
}

/// Evidence copies: with a flow and PFC watched, the program copies exactly the frames of that
/// flow and every PFC / PAUSE frame, each cut to the snap length, with the flow key, class,
/// AETH and priority bits the host's classifier gives the whole frame; nothing else.
#[test]
fn kernel_copies_the_watched_flows_frames_for_evidence() {
    use analyzer::capture::kernel::evidence::{EvidenceMaps, EvidenceSource};
    use analyzer::report::evidence::select::Tag;
    use analyzer_common::flow::FlowKey;
    if !privileged("kernel_copies_the_watched_flows_frames_for_evidence") {
        return;
    }
    pin_to_cpu(0).expect("pin to CPU 0");
    let snaplen = 96;
    let mut ebpf = load(LoadOptions { evidence_snaplen: snaplen, ..LoadOptions::default() }, &[PROGRAM]).unwrap();
    let mut ev = EvidenceMaps::new(&mut ebpf).unwrap();
    let frames: Vec<Vec<u8>> = ["gobackn.pcap", "pfc.pcap", "rtt.pcap"]
        .iter()
        .flat_map(|n| fixtures::all().into_iter().find(|f| f.name == *n).unwrap().frames)
        .map(|f| f.record.data)
        .collect();
    let tag = |d: &[u8]| {
        let mut s = PacketSummary::zeroed();
        classify(d, d.len() as u32, &mut s);
        Tag::of(&s)
    };
    // The first frame's flow (gobackn's data flow).
    let watched: FlowKey = tag(&frames[0]).flow;
    assert_eq!(ev.watch_flows(&[watched], u64::MAX).unwrap(), 1);
    ev.watch_pause(u64::MAX).unwrap();
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    let mut want = Vec::new();
    for d in &frames {
        let r = test_run(fd, d, 1, None).unwrap();
        assert_eq!(r.retval, XDP_PASS);
        let t = tag(d);
        let pause = matches!(t.class, analyzer_common::FrameClass::Pfc | analyzer_common::FrameClass::Pause);
        if pause || (t.flow == watched && matches!(t.class, analyzer_common::FrameClass::Roce)) {
            want.push((d[..d.len().min(snaplen as usize)].to_vec(), d.len() as u32, t));
        }
    }
    let mut got = Vec::new();
    ev.drain(u64::MAX, &mut |e| got.push((e.data[..e.caplen as usize].to_vec(), e.orig_len, Tag::of_frame(e))));
    assert!(want.len() > 10 && want.iter().any(|w| w.2.priorities != 0), "{} frames to copy", want.len());
    // PFC frames have no flow: compare what the kernel fills in for them.
    let norm = |v: Vec<(Vec<u8>, u32, Tag)>| -> Vec<(Vec<u8>, u32, Tag)> {
        v.into_iter()
            .map(|(d, l, mut t)| {
                if t.priorities != 0 {
                    t.flow = FlowKey::default();
                }
                (d, l, t)
            })
            .collect()
    };
    assert_eq!(norm(got), norm(want));
    // Past its deadline a flow is no longer copied.
    ev.watch_flows(&[watched], 1).unwrap();
    let mut maps = AyaMaps::new(&mut ebpf).unwrap();
    let before = maps.snapshot().unwrap().counter(analyzer_common::maps::counter::EVIDENCE);
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    test_run(fd, &frames[0], 1, None).unwrap();
    assert_eq!(
        maps.snapshot().unwrap().counter(analyzer_common::maps::counter::EVIDENCE),
        before + 1,
        "the later deadline holds"
    );
}

#[test]
fn kernel_passes_arbitrary_frames_untouched() {
    if !privileged("kernel_passes_arbitrary_frames_untouched") {
        return;
    }
    pin_to_cpu(0).expect("pin to CPU 0");
    let ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
    let scratch: PerCpuArray<_, Scratch> = PerCpuArray::try_from(ebpf.map(MAP_SCRATCH).unwrap()).unwrap();
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    // Deterministic pseudo-random frames, and valid frames with bytes flipped.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let seeds: Vec<Vec<u8>> = fixtures::all().into_iter().flat_map(|f| f.frames).map(|f| f.record.data).collect();
    for n in 0..3000 {
        let mut data = if n % 2 == 0 {
            (0..(14 + next() % 300)).map(|_| next() as u8).collect::<Vec<u8>>()
        } else {
            let mut d = seeds[next() as usize % seeds.len()].clone();
            for _ in 0..1 + next() % 4 {
                let at = next() as usize % d.len();
                d[at] = next() as u8;
            }
            d
        };
        if data.len() < 14 {
            data.resize(14, 0);
        }
        let mut out = vec![0u8; data.len()];
        let r = test_run(fd, &data, 1, Some(&mut out)).unwrap();
        assert_eq!(r.retval, XDP_PASS);
        assert_eq!(out, data);
        let mut want = PacketSummary::zeroed();
        classify(&data[..], data.len() as u32, &mut want);
        assert_eq!(scratch.get(&0, 0).unwrap()[0].summary, want, "frame {data:02x?}");
    }
}

/// The program loaded as the agent loads it, its maps, and the highest online CPU, for a
/// test that runs frames on CPUs 0 and 1 (None, said loudly, without privileges).
fn loaded_on_two_cpus(test: &str) -> Option<(aya::Ebpf, AyaMaps, u32)> {
    if !privileged(test) {
        return None;
    }
    let online = aya::util::online_cpus().expect("online CPUs");
    assert!(online.contains(&0) && online.contains(&1), "this test needs CPUs 0 and 1 online: {online:?}");
    let mut ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
    let maps = AyaMaps::new(&mut ebpf).expect("maps");
    // The logs alone: only the drains read them (the keeper's copies are tested apart).
    maps.keep_logs(false);
    Some((ebpf, maps, *online.iter().max().unwrap()))
}

/// The times of the PFC/PAUSE events the maps hold, drained `batch` at a time until none is
/// left.
fn drained_event_times(maps: &mut AyaMaps, batch: u64) -> Vec<u64> {
    use analyzer::capture::kernel::snapshot::KernelEvent;
    let mut times = Vec::new();
    while maps.drain_events(batch, &mut |e| {
        if let KernelEvent::Frame(e) = e {
            times.push(e.ts_ns)
        }
    }) > 0
    {}
    times
}

/// Between the agent's drains a thread of its own copies what each CPU writes to its logs:
/// twice a timeline log's records and twice an event log's PFC events, written on one CPU in
/// four bursts with 50 ms between them (ten of the keeper's rounds) and not one drain until
/// the end, are all read back in order, none lost. Without the keeper (the same bursts) every
/// log laps: each loses all but its newest slots.
#[test]
fn the_keeper_copies_the_logs_while_no_drain_runs() {
    use analyzer_common::maps::{EVENT_SLOTS, counter};
    use analyzer_common::opcode::op;
    if !privileged("the_keeper_copies_the_logs_while_no_drain_runs") {
        return;
    }
    for keep in [true, false] {
        let mut ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
        let mut maps = AyaMaps::new(&mut ebpf).expect("maps");
        maps.keep_logs(keep);
        let fd = program_fd(&ebpf, PROGRAM).unwrap();
        let slots = maps.timeline_slots() as u32;
        let roce = tests::synth::Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, op::RDMA_WRITE_MIDDLE, 0x123, 7)
            .payload(256)
            .build();
        let pfc = tests::synth::pfc([2, 0, 0, 0, 7, 1], 1 << 3, [0, 0, 0, 9, 0, 0, 0, 0]);
        pin_to_cpu(1).unwrap();
        let before = maps.snapshot().unwrap();
        for _ in 0..4 {
            test_run(fd, &roce, slots / 2, None).unwrap();
            test_run(fd, &pfc, EVENT_SLOTS / 2, None).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        pin_to_cpu(0).unwrap();
        maps.release_records();
        let mut records = Vec::new();
        while maps.drain_records(100_000, &mut |r, _| records.push(r.ts_ns)) > 0 {}
        let events = drained_event_times(&mut maps, 100_000);
        let after = maps.snapshot().unwrap();
        let d = |i: u32| after.counter(i) - before.counter(i);
        assert_eq!((d(counter::RECORDS), d(counter::EVENTS)), (2 * slots as u64, 2 * EVENT_SLOTS as u64));
        assert!(records.is_sorted() && events.is_sorted(), "in time order");
        let read = (records.len() as u64, events.len() as u64);
        let lost = (maps.records_lost(), maps.events_lost());
        if keep {
            assert_eq!(read, (2 * slots as u64, 2 * EVENT_SLOTS as u64), "every one read (kept)");
            assert_eq!(lost, (0, 0), "none lost (kept)");
        } else {
            assert_eq!(read, (slots as u64 - 1, EVENT_SLOTS as u64 - 1), "the newest of each log");
            assert_eq!(lost, (slots as u64 + 1, EVENT_SLOTS as u64 + 1), "the others counted");
        }
    }
}

/// As the agent runs it, each CPU writes its timeline records to its own log, and the agent
/// reads the logs back in time order: a frame on CPU 1 before one on CPU 0 comes first (log by
/// log, CPU 0's would). A burst on one CPU laps that CPU's log: the agent reads the newest
/// records it holds, in order, and counts every record it could not read.
#[test]
fn kernel_writes_each_cpus_records_to_its_own_log() {
    use analyzer_common::maps::{counter, timeline_slots};
    use analyzer_common::opcode::op;
    let Some((ebpf, mut maps, highest)) = loaded_on_two_cpus("kernel_writes_each_cpus_records_to_its_own_log") else {
        return;
    };
    assert_eq!(maps.cpu_timelines(), highest as usize + 1, "a log for every CPU number up to the highest online");
    let slots = maps.timeline_slots();
    assert_eq!(slots, timeline_slots(highest + 1) as usize, "each CPU's log as large as the CPUs allow");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    let frame = |psn: u32| {
        tests::synth::Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, op::RDMA_WRITE_MIDDLE, 0x123, psn)
            .payload(256)
            .build()
    };
    pin_to_cpu(1).unwrap();
    test_run(fd, &frame(1), 1, None).unwrap();
    pin_to_cpu(0).unwrap();
    test_run(fd, &frame(2), 1, None).unwrap();
    maps.release_records();
    let mut psns = Vec::new();
    maps.drain_records(1000, &mut |r, _| psns.push(r.psn));
    assert_eq!(psns, vec![1, 2], "in time order across the CPUs' logs");

    // Past a whole log.
    let runs = slots as u32 + 40_000;
    pin_to_cpu(1).unwrap();
    let before = maps.snapshot().unwrap();
    let lost_before = maps.records_lost();
    test_run(fd, &frame(3), runs, None).unwrap();
    let mut times = Vec::new();
    while maps.drain_records(10_000, &mut |r, _| times.push(r.ts_ns)) > 0 {}
    let after = maps.snapshot().unwrap();
    let d = |i: u32| after.counter(i) - before.counter(i);
    assert_eq!(d(counter::RECORDS), runs as u64, "every run writes its record");
    // The oldest record of a full log is where the CPU's next record goes: read as lost.
    let kept = slots as u64 - 1;
    assert_eq!(times.len() as u64, kept, "the newest records of the {slots} slots");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order");
    assert_eq!(d(counter::TIMELINE_FULL), 0, "the shared ring refused none");
    assert_eq!(maps.records_lost() - lost_before, runs as u64 - kept, "every record not read is counted");
    pin_to_cpu(0).unwrap();
}

/// Records name their flow by the id the program gave its entry (its slot's), and the agent
/// reads them back with the flow's key: while the table has room, when it holds its
/// `--max-flows` (the program writes the record whole, key and all), and after a flow removed
/// from the kernel has given its slot back to a new flow (the new flow's records carry its own
/// key, not the old one's).
#[test]
fn records_name_their_flows_by_id_through_a_full_map_and_a_given_back_id() {
    use analyzer_common::flow::FlowKey;
    use analyzer_common::maps::counter;
    use analyzer_common::opcode::op;
    if !privileged("records_name_their_flows_by_id_through_a_full_map_and_a_given_back_id") {
        return;
    }
    let mut ebpf = load(LoadOptions { max_flows: 2, ..Default::default() }, &[PROGRAM]).expect("load");
    let mut maps = AyaMaps::new(&mut ebpf).expect("maps");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    let frame = |host: u8, psn: u32| {
        tests::synth::Roce::v4([10, 7, 0, host], [10, 7, 0, 100], 49152, op::RDMA_WRITE_MIDDLE, 0x40 + host as u32, psn)
            .build()
    };
    let run = |maps: &mut AyaMaps, frames: &[(u8, u32)]| {
        for &(host, psn) in frames {
            test_run(fd, &frame(host, psn), 1, None).unwrap();
        }
        maps.release_records();
        let mut got = Vec::new();
        let mut indexes = Vec::new();
        maps.drain_records(1000, &mut |r, index| {
            got.push((r.src_ip[3], r.dst_qp, r.psn));
            indexes.push(index);
        });
        (got, indexes)
    };
    // Flows 1 and 2 take the two ids; flow 3 finds the map full and its record comes whole.
    let (got, indexes) = run(&mut maps, &[(1, 10), (2, 20), (3, 30), (1, 11)]);
    assert_eq!(got, vec![(1, 0x41, 10), (2, 0x42, 20), (3, 0x43, 30), (1, 0x41, 11)]);
    let snap = maps.snapshot().unwrap();
    assert_eq!((snap.flows.len(), snap.counter(counter::FLOW_MAP_FULL)), (2, 1));
    let id_of = |snap: &analyzer::capture::kernel::snapshot::KernelSnapshot, host: u8| {
        snap.flows.iter().find(|(k, _)| k.src[3] == host).map(|(_, e)| e.counters.id)
    };
    let (id1, id2) = (id_of(&snap, 1).unwrap(), id_of(&snap, 2).unwrap());
    assert!(id1 != 0 && id2 != 0 && id1 != id2, "ids {id1}, {id2}");
    assert_eq!(indexes, vec![id1, id2, 0, id1], "each record's flow index is its id (none for a whole record)");
    // Flow 1 is removed: its id is given back at the next poll, and flow 4 takes it.
    let gone: FlowKey = snap.flows.iter().find(|(k, _)| k.src[3] == 1).unwrap().0;
    maps.remove_flows(&[gone]).unwrap();
    maps.snapshot().unwrap();
    let (got, _) = run(&mut maps, &[(4, 40), (2, 21), (4, 41)]);
    assert_eq!(got, vec![(4, 0x44, 40), (2, 0x42, 21), (4, 0x44, 41)]);
    let snap = maps.snapshot().unwrap();
    assert_eq!(id_of(&snap, 4), Some(id1), "the id given back");
    assert_eq!(maps.records_lost(), 0, "every record named a known flow");
}

/// New flows take the slots the placement rule names ([`analyzer_common::table::pick`], which
/// the program computes from masks of claimable ways made without a branch): 60 flows in a
/// table of 10 buckets (most fill past their first four ways, so every level is used), then
/// 20 of them removed (their slots dead once the next poll lets them go) and 20 new flows,
/// which take dead slots where those are a bucket's first claimable way. The host's model of
/// the table follows the same insertions; each flow's id must be its predicted slot plus one.
#[test]
fn new_flows_take_the_slots_the_placement_rule_names() {
    use analyzer_common::flow::FlowKey;
    use analyzer_common::opcode::op;
    use analyzer_common::table::{self, WAYS, tag};
    if !privileged("new_flows_take_the_slots_the_placement_rule_names") {
        return;
    }
    let max_flows = 64;
    let buckets = table::buckets_for(max_flows);
    let mut ebpf = load(LoadOptions { max_flows, ..Default::default() }, &[PROGRAM]).expect("load");
    let mut maps = AyaMaps::new(&mut ebpf).expect("maps");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    let frame = |i: u32| {
        tests::synth::Roce::v4([10, 8, 0, i as u8], [10, 8, 1, 1], 49152, op::RDMA_WRITE_MIDDLE, 0x200 + i, 1).build()
    };
    let key_of = |snap: &analyzer::capture::kernel::snapshot::KernelSnapshot, i: u32| {
        snap.flows.iter().find(|(k, _)| k.dst_qp == 0x200 + i).map(|(k, e)| (*k, e.counters.id))
    };
    // The model: every slot's tag state, filled as the program fills it.
    let mut states = vec![tag::FREE; (buckets * WAYS as u32) as usize];
    let place = |states: &mut Vec<u64>, key: &FlowKey| {
        let h = table::hash(key);
        let choices = table::buckets(h, buckets);
        let masks =
            choices.map(|b| (0..WAYS).fold(0, |m, w| m | table::claimable_bit(states[b as usize * WAYS + w], w)));
        let (c, way) = table::pick(masks).expect("a claimable slot");
        let slot = choices[c] * WAYS as u32 + way;
        states[slot as usize] = tag::LIVE;
        slot
    };
    let mut levels = [0u32; 4];
    let mut insert = |maps: &mut AyaMaps, states: &mut Vec<u64>, flows: std::ops::Range<u32>| {
        for i in flows {
            test_run(fd, &frame(i), 1, None).unwrap();
            let snap = maps.snapshot().unwrap();
            let (key, id) = key_of(&snap, i).unwrap_or_else(|| panic!("flow {i} not in the table"));
            let want = place(states, &key);
            assert_eq!(id, want + 1, "flow {i}: slot {} where the rule names {want}", id - 1);
            levels[table::LEVELS.iter().position(|&l| want % (WAYS as u32) < l).unwrap()] += 1;
        }
    };
    insert(&mut maps, &mut states, 0..60);
    // Remove every third flow; a poll lets their slots go (dead, claimable again).
    let snap = maps.snapshot().unwrap();
    let gone: Vec<(FlowKey, u32)> = (0..60).step_by(3).map(|i| key_of(&snap, i).unwrap()).collect();
    maps.remove_flows(&gone.iter().map(|(k, _)| *k).collect::<Vec<_>>()).unwrap();
    maps.snapshot().unwrap();
    for (_, id) in &gone {
        states[table::slot_of(*id) as usize] = tag::DEAD;
    }
    insert(&mut maps, &mut states, 60..80);
    let snap = maps.snapshot().unwrap();
    assert_eq!(snap.flows.len(), 60, "40 kept and 20 new");
    let reused = (60..80).filter(|&i| gone.iter().any(|(_, id)| Some(*id) == key_of(&snap, i).map(|(_, x)| x)));
    assert!(reused.count() > 0, "some new flows took dead slots");
    assert!(levels[1] + levels[2] + levels[3] > 0, "ways past the fourth used: {levels:?}");
}

/// More new flows between two drains than the flow-id ring holds: the announcements it had no
/// room for are lost, and so are the records of those flows until the next poll's read of the
/// flow map (which holds every entry's id) names them; every record is handed on or counted
/// lost, and after that poll every flow's records are handed on with its key.
#[test]
fn records_of_flows_whose_announcement_was_lost_are_counted_until_the_map_names_them() {
    use analyzer_common::maps::{DEFAULT_FLOW_IDS_BYTES, FlowId};
    if !privileged("records_of_flows_whose_announcement_was_lost_are_counted_until_the_map_names_them") {
        return;
    }
    let mut ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
    let mut maps = AyaMaps::new(&mut ebpf).expect("maps");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    // An announcement takes its 48 bytes and the ring's 8-byte header.
    let room = DEFAULT_FLOW_IDS_BYTES as u64 / (std::mem::size_of::<FlowId>() as u64 + 8);
    let n = room as u32 + 1500;
    let frames: Vec<Vec<u8>> = (0..n).map(|i| tests::synth::Roce::numbered(i).build()).collect();
    pin_to_cpu(0).unwrap();
    let pass = |maps: &mut AyaMaps| {
        for f in &frames {
            test_run(fd, f, 1, None).unwrap();
        }
        maps.release_records();
        let mut qps = std::collections::HashSet::new();
        let mut handed = 0u64;
        while maps.drain_records(10_000, &mut |r, _| {
            assert_eq!(r.src_ip[..2], [10, 1], "a record with its flow's key");
            qps.insert(r.dst_qp);
            handed += 1;
        }) > 0
        {}
        (handed, qps.len() as u64)
    };
    let (handed, flows) = pass(&mut maps);
    let lost = maps.records_lost();
    assert_eq!(handed + lost, n as u64, "every record handed on or counted lost");
    assert!(lost >= n as u64 - room && handed >= room - 1, "{handed} handed on, {lost} lost (room for {room})");
    assert_eq!(flows, handed, "one record a flow");
    // The next poll reads the ids from the flow map: nothing is lost any more.
    maps.snapshot().unwrap();
    let (handed, flows) = pass(&mut maps);
    assert_eq!((handed, flows, maps.records_lost()), (n as u64, n as u64, lost));
}

/// PFC frames' events go to their CPU's event log, read back in time order across the CPUs;
/// a burst laps the log, and every event not read is counted (`ringbuf_full` in the report).
#[test]
fn kernel_writes_each_cpus_pfc_events_to_its_own_log() {
    use analyzer::capture::kernel::snapshot::KernelEvent;
    use analyzer_common::maps::{EVENT_SLOTS, counter};
    let Some((ebpf, mut maps, _)) = loaded_on_two_cpus("kernel_writes_each_cpus_pfc_events_to_its_own_log") else {
        return;
    };
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    let pfc = |quanta: u16| tests::synth::pfc([2, 0, 0, 0, 7, 1], 1 << 3, [0, 0, 0, quanta, 0, 0, 0, 0]);
    pin_to_cpu(1).unwrap();
    test_run(fd, &pfc(1), 1, None).unwrap();
    pin_to_cpu(0).unwrap();
    test_run(fd, &pfc(2), 1, None).unwrap();
    maps.release_records();
    let mut quanta = Vec::new();
    maps.drain_events(1000, &mut |e| {
        if let KernelEvent::Frame(e) = e {
            quanta.push(e.summary.pfc_quanta[3])
        }
    });
    assert_eq!(quanta, vec![1, 2], "in time order across the CPUs' logs");

    let runs = 6000;
    pin_to_cpu(1).unwrap();
    let before = maps.snapshot().unwrap();
    test_run(fd, &pfc(3), runs, None).unwrap();
    let times = drained_event_times(&mut maps, 1000);
    let after = maps.snapshot().unwrap();
    let d = |i: u32| after.counter(i) - before.counter(i);
    assert_eq!(d(counter::EVENTS), runs as u64, "every run writes its event");
    let kept = EVENT_SLOTS as u64 - 1;
    assert_eq!(times.len() as u64, kept, "the newest events of the {EVENT_SLOTS} slots");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order");
    assert_eq!(
        (d(counter::RINGBUF_FULL), maps.events_lost()),
        (0, runs as u64 - kept),
        "every event not read is counted"
    );
    pin_to_cpu(0).unwrap();
}

fn memlock(ebpf: &aya::Ebpf, map: &str) -> u64 {
    tests::tools::map_memlock(ebpf, map).unwrap()
}

/// The flow table is preallocated for `--max-flows` ([`analyzer_common::table`]): at most 256
/// bytes a flow, the same on any number of CPUs (a per-CPU value would add its size for every
/// possible CPU), as the kernel accounts the two arrays; flows that arrive take no more.
#[test]
fn flow_table_holds_at_most_256_bytes_a_flow() {
    use analyzer_common::table::{self, FlowSlot, MAP_FLOW_SLOTS, MAP_FLOW_TAGS, Tags};
    if !privileged("flow_table_holds_at_most_256_bytes_a_flow") {
        return;
    }
    let ebpf = load(LoadOptions::default(), &[PROGRAM]).expect("load");
    let total = |ebpf: &aya::Ebpf| memlock(ebpf, MAP_FLOW_TAGS) + memlock(ebpf, MAP_FLOW_SLOTS);
    let before = total(&ebpf);
    let max = analyzer_common::maps::DEFAULT_MAX_FLOWS as u64;
    let slots = table::capacity(table::buckets_for(max as u32)) as u64;
    let exact = slots * std::mem::size_of::<FlowSlot>() as u64 + slots / 8 * std::mem::size_of::<Tags>() as u64;
    // Each array rounded up to pages, and the kernel's few hundred bytes of array header.
    assert!(before >= exact && before <= exact + 4 * 4096, "{before} bytes, {exact} of slots and tags");
    assert!(before <= 256 * max, "{before} bytes for {max} flows");
    let fd = program_fd(&ebpf, PROGRAM).unwrap();
    for i in 0..300u32 {
        test_run(fd, &tests::synth::Roce::numbered(i).build(), 1, None).unwrap();
    }
    assert_eq!(total(&ebpf), before, "300 flows take no more");
}

//! ns per frame of the shared classifier, by frame class (host side; the kernel side is
//! measured with BPF_PROG_TEST_RUN). Run: `cargo bench -p tests --bench parser`.

use std::hint::black_box;

use analyzer_common::opcode::{CNP, op};
use analyzer_common::wire::ext::{Aeth, Reth};
use analyzer_common::{PacketSummary, classify};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tests::synth::{Encap, Roce, Vlan, mirror, pfc, udp_ipv4};

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let mut write = Roce::v4([10, 0, 0, 1], [10, 0, 0, 2], 49152, op::RDMA_WRITE_FIRST, 0x123, 7).payload(4096);
    write.ext.reth = Reth { va: 0x1000, rkey: 1, dma_len: 65536 };
    write.vlans = vec![Vlan::dot1q(3, 100)];
    let mut ack = Roce::v4([10, 0, 0, 2], [10, 0, 0, 1], 49152, op::ACKNOWLEDGE, 0x321, 7);
    ack.ext.aeth = Aeth::ack(31, 1);
    let cnp = Roce::v4([10, 0, 0, 2], [10, 0, 0, 1], 49152, CNP, 0x321, 0);
    let v6 = Roce::v6([0xfd; 16], [0xfe; 16], 49152, op::SEND_ONLY, 9, 1).payload(1024);
    vec![
        ("roce_write_first_vlan", write.build()),
        ("roce_ack", ack.build()),
        ("cnp", cnp.build()),
        ("roce_v6_send", v6.build()),
        ("erspan3_roce_write", mirror(Encap::ErspanIII(false), &write.build(), Some(128))),
        ("pfc", pfc([2, 0, 0, 0, 7, 1], 1 << 3, [0, 0, 0, 0xFFFF, 0, 0, 0, 0])),
        ("non_roce_udp", udp_ipv4([10, 0, 0, 9], [10, 0, 0, 1], 5353, 5353, 64)),
    ]
}

fn classify_by_class(c: &mut Criterion) {
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(1));
    for (name, f) in frames() {
        let mut s = PacketSummary::zeroed();
        let len = f.len() as u32;
        g.bench_function(name, |b| b.iter(|| classify(black_box(&f[..]), black_box(len), &mut s)));
    }
    g.finish();
}

criterion_group!(benches, classify_by_class);
criterion_main!(benches);

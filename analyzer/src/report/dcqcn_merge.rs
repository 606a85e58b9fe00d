//! `merge` of the DCQCN sections of several reports. A flow one report saw with its CNPs is
//! that report's, as it is. A flow several reports saw (a capture split in time, or two
//! collectors) has its counts added and its worst cut the lowest; a median is kept where one
//! report alone judged CNPs of that kind (the median of its samples is the median of all),
//! and is null where several did: the reports carry medians, not the samples behind them.
//! Hosts are recomputed over the merged flows the same way: counts added over every report,
//! medians where one report alone holds the host's samples. Each report judged its CNPs on its
//! own frames: a merge of several reports says so (`dcqcn_not_stitched`).

use std::collections::BTreeMap;

use crate::model::*;

/// Medians of the merged section that several reports' samples would have been needed for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Unjoined {
    pub flows: u64,
    pub hosts: u64,
    /// Reports with DCQCN flows or plots (each judged its CNPs on its own frames).
    pub reports: u64,
}

/// The DCQCN sections joined (none when no report had one).
pub fn merge(sections: &[&Dcqcn]) -> Option<(Dcqcn, Unjoined)> {
    let first = sections.first()?;
    let with = sections.iter().filter(|s| !s.flows.is_empty() || !s.plots.is_empty()).count() as u64;
    let mut unjoined = Unjoined { reports: with, ..Default::default() };
    if let [one] = sections {
        return Some(((*one).clone(), unjoined));
    }
    let mut flows: BTreeMap<(&str, &str, u16, u32), Vec<&DcqcnStats>> = BTreeMap::new();
    let mut hosts: BTreeMap<&str, Vec<&DcqcnStats>> = BTreeMap::new();
    for s in sections {
        for f in &s.flows {
            flows.entry((&f.src, &f.dst, f.udp_sport, f.dst_qp)).or_default().push(&f.stats);
        }
        for h in &s.hosts {
            hosts.entry(&h.src).or_default().push(&h.stats);
        }
    }
    let mut host_flows: BTreeMap<&str, u64> = BTreeMap::new();
    let mut flows: Vec<DcqcnFlow> = flows
        .into_iter()
        .map(|((src, dst, udp_sport, dst_qp), list)| {
            *host_flows.entry(src).or_default() += 1;
            let (stats, whole) = join(&list);
            unjoined.flows += u64::from(!whole);
            DcqcnFlow { src: src.into(), dst: dst.into(), udp_sport, dst_qp, stats }
        })
        .collect();
    let mut hosts: Vec<DcqcnHost> = hosts
        .into_iter()
        .map(|(src, list)| {
            let (stats, whole) = join(&list);
            unjoined.hosts += u64::from(!whole);
            DcqcnHost { src: src.into(), flows: host_flows.get(src).copied().unwrap_or(0), stats }
        })
        .collect();
    // In the analysis' order: by address (10.0.2.2 before 10.0.2.10), not by text.
    flows.sort_by(|a, b| {
        (addr(&a.src), addr(&a.dst), a.udp_sport, a.dst_qp).cmp(&(addr(&b.src), addr(&b.dst), b.udp_sport, b.dst_qp))
    });
    hosts.sort_by(|a, b| addr(&a.src).cmp(&addr(&b.src)));
    let mut plots: Vec<DcqcnPlot> = sections.iter().flat_map(|s| s.plots.iter().cloned()).collect();
    plots.truncate(crate::report::assemble::dcqcn::MAX_PLOTS);
    let merged = Dcqcn {
        rate_window_ns: first.rate_window_ns,
        horizon_ns: first.horizon_ns,
        unattributed_cnps: sections.iter().map(|s| s.unattributed_cnps).fold(0, u64::saturating_add),
        flows,
        hosts,
        plots,
        edge: None,
    };
    Some((merged, unjoined))
}

/// An address for ordering (text that is not one sorts after every address, as text).
fn addr(s: &str) -> (Option<std::net::IpAddr>, &str) {
    (s.parse().ok(), s)
}

/// One flow's (or host's) stats over several reports, and whether every median could be kept.
fn join(list: &[&DcqcnStats]) -> (DcqcnStats, bool) {
    let sum = |f: fn(&DcqcnStats) -> u64| list.iter().map(|s| f(s)).fold(0u64, u64::saturating_add);
    let mut whole = true;
    // The one report with samples of this kind gives the median; several cannot.
    let mut alone = |f: fn(&DcqcnStats) -> Option<u64>| {
        let mut with = list.iter().filter_map(|s| f(s));
        let one = with.next();
        if with.next().is_some() {
            whole = false;
            return None;
        }
        one
    };
    let reaction_ns_p50 = alone(|s| s.reaction_ns_p50);
    let recovery_ns_p50 = alone(|s| s.recovery_ns_p50);
    let cut_ratio_p50 = alone(|s| s.cut_ratio_p50.map(f64::to_bits)).map(f64::from_bits);
    let stats = DcqcnStats {
        cnps: sum(|s| s.cnps),
        reacted: sum(|s| s.reacted),
        unreacted_cnps: sum(|s| s.unreacted_cnps),
        no_rate_before: sum(|s| s.no_rate_before),
        not_recovered: sum(|s| s.not_recovered),
        cut_ratio_p50,
        worst_cut_ratio: list.iter().filter_map(|s| s.worst_cut_ratio).min_by(f64::total_cmp),
        reaction_ns_p50,
        recovery_ns_p50,
    };
    (stats, whole)
}

/// The note of a merge of several reports, `reports` of them with DCQCN flows: each judged
/// its CNPs on its own frames.
pub fn stitch_note(reports: u64) -> Note {
    Note::new(
        NoteCode::DcqcnNotStitched,
        format!(
            "DCQCN: {reports} of the reports judged CNPs, each on its own frames' rate windows (the rate before a \
             CNP, its reaction and recovery within --dcqcn-horizon) and for the flows it watched: a CNP near a cut \
             in time has no rate before or no recovery in its report, frames another report held are not in its \
             rates, and the plots are each report's series"
        ),
    )
}

/// The note of a merge that could not keep some medians.
pub fn note(u: Unjoined) -> Note {
    Note::new(
        NoteCode::DcqcnMediansNotMerged,
        format!(
            "DCQCN: {} flows and {} hosts had CNPs judged in several reports; their counts and worst cut are \
             over all, their medians (cut ratio, reaction, recovery) null: reports carry medians, not the \
             samples behind them",
            u.flows, u.hosts
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(cnps: u64, cut: Option<f64>, reaction: Option<u64>) -> DcqcnStats {
        DcqcnStats {
            cnps,
            reacted: cnps / 2,
            unreacted_cnps: cnps - cnps / 2,
            no_rate_before: 1,
            not_recovered: 0,
            cut_ratio_p50: cut,
            worst_cut_ratio: cut.map(|c| c / 2.0),
            reaction_ns_p50: reaction,
            recovery_ns_p50: None,
        }
    }

    fn section(flows: Vec<(&str, u32, DcqcnStats)>) -> Dcqcn {
        let hosts =
            flows.iter().map(|(src, _, s)| DcqcnHost { src: src.to_string(), flows: 1, stats: s.clone() }).collect();
        Dcqcn {
            rate_window_ns: 1000,
            horizon_ns: 100_000,
            unattributed_cnps: 1,
            flows: flows
                .into_iter()
                .map(|(src, qp, stats)| DcqcnFlow { src: src.into(), dst: "d".into(), udp_sport: 1, dst_qp: qp, stats })
                .collect(),
            hosts,
            plots: Vec::new(),
            edge: None,
        }
    }

    #[test]
    fn a_flow_of_one_report_is_kept_and_one_of_several_is_added() {
        let a = section(vec![("a", 1, stats(4, Some(0.5), Some(900))), ("b", 2, stats(6, Some(0.6), Some(700)))]);
        // Flow a/1 again, its CNPs not judged here (no rate before): a's medians stand.
        let b = section(vec![("a", 1, stats(2, None, None))]);
        let (m, u) = merge(&[&a, &b]).unwrap();
        assert_eq!(u, Unjoined { reports: 2, ..Default::default() });
        assert_eq!(m.unattributed_cnps, 2);
        let f = &m.flows[0].stats;
        assert_eq!((f.cnps, f.reacted, f.unreacted_cnps, f.no_rate_before), (6, 3, 3, 2));
        assert_eq!((f.cut_ratio_p50, f.worst_cut_ratio, f.reaction_ns_p50), (Some(0.5), Some(0.25), Some(900)));
        assert_eq!(m.flows[1], a.flows[1]);
        assert_eq!(
            m.hosts.iter().map(|h| (h.src.as_str(), h.flows, h.stats.cnps)).collect::<Vec<_>>(),
            [("a", 1, 6), ("b", 1, 6)]
        );
    }

    #[test]
    fn medians_judged_in_two_reports_are_not_made_up() {
        let a = section(vec![("a", 1, stats(4, Some(0.5), Some(900)))]);
        let b = section(vec![("a", 1, stats(4, Some(0.7), Some(100)))]);
        let (m, u) = merge(&[&a, &b]).unwrap();
        assert_eq!(u, Unjoined { flows: 1, hosts: 1, reports: 2 });
        let f = &m.flows[0].stats;
        assert_eq!((f.cnps, f.cut_ratio_p50, f.worst_cut_ratio, f.reaction_ns_p50), (8, None, Some(0.25), None));
        assert_eq!(m.hosts[0].stats.cut_ratio_p50, None);
    }

    #[test]
    fn one_section_is_kept_as_it_is() {
        let a = section(vec![("a", 1, stats(4, Some(0.5), Some(900)))]);
        assert_eq!(merge(&[&a]), Some((a.clone(), Unjoined { reports: 1, ..Default::default() })));
        assert_eq!(merge(&[]), None);
    }
}

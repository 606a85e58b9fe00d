//! Loading the XDP program with the map sizes asked for, and attaching it to an interface.

use analyzer_common::maps::{self, MAP_EVENTS};
use analyzer_common::table;
use aya::programs::{Xdp, XdpMode};

use super::{KernelError, OBJECT};

#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Flows the kernel's flow table holds ([`analyzer_common::table::buckets_for`]).
    pub max_flows: u32,
    /// Bytes of the event ring buffer (a power of two, multiple of the page size).
    pub ringbuf_bytes: u32,
    /// Let the program log (aya-log) on its rare paths (maps full, ring buffer full).
    pub kernel_log: bool,
    /// Write a timeline record per RoCE/CNP frame (RTT, CE/CNP timing, incast).
    pub timeline: bool,
    /// PMTU of flows that have not shown their own (`--pmtu`); 0 learns each flow's.
    pub pmtu: u32,
    /// Mirrored copies of one frame are matched within this (`--match-window`).
    pub match_window_ns: u64,
    /// `--filter`: frames it refuses are counted (`FILTERED`) and not analysed.
    pub filter: Option<analyzer_common::filter::Filter>,
    /// `--evidence-snaplen`: the program copies the frames the agent asks for, this many bytes
    /// of each (0: no evidence, the copy path pruned).
    pub evidence_snaplen: u32,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_flows: maps::DEFAULT_MAX_FLOWS,
            ringbuf_bytes: maps::DEFAULT_RINGBUF_BYTES,
            kernel_log: false,
            timeline: true,
            pmtu: 0,
            match_window_ns: analyzer_common::vantage::DEFAULT_WINDOW_NS,
            filter: None,
            evidence_snaplen: 0,
        }
    }
}

/// True when an OS error somewhere in `e`'s chain is one of `codes`.
pub(crate) fn has_errno(e: &(dyn std::error::Error + 'static), codes: &[i32]) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.raw_os_error().is_some_and(|c| codes.contains(&c))
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// The CPUs that get a timeline and an event log of their own: every online CPU's number is
/// below it (capped at [`maps::MAX_TIMELINE_CPUS`]). A CPU brought online later with a higher
/// number writes to the shared rings, as does every CPU when the online CPUs cannot be read
/// (said on stderr).
pub fn log_cpus() -> u32 {
    match aya::util::online_cpus() {
        Ok(cpus) => cpus.iter().max().map_or(0, |c| c + 1).min(maps::MAX_TIMELINE_CPUS),
        Err((path, e)) => {
            tracing::warn!(
                "reading the online CPUs ({path}): {e}; every CPU's records and events go to the shared rings"
            );
            0
        }
    }
}

/// Loads the object and verifies the named programs (the analyzer, and the benchmark baseline
/// when `programs` includes it).
pub fn load(opts: LoadOptions, programs: &[&str]) -> Result<aya::Ebpf, KernelError> {
    load_object(OBJECT, opts, programs, true)
}

/// Loads `object` (the embedded one, or for a benchmark another build of the program);
/// `strict` requires the globals this build sets (an older object may lack them).
pub fn load_object(
    object: &[u8],
    opts: LoadOptions,
    programs: &[&str],
    strict: bool,
) -> Result<aya::Ebpf, KernelError> {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(KernelError::NoBtf);
    }
    // aya-log-ebpf enables every level unless told otherwise: 0 silences the program.
    let level: u8 = if opts.kernel_log { aya_log::Level::Trace as u8 } else { 0 };
    // Each log a CPU's part of these arrays (an array has at least one entry); no timeline
    // logs without records.
    let event_cpus = log_cpus();
    let timeline_cpus = if opts.timeline { event_cpus } else { 0 };
    let entries = |cpus: u32, per_cpu: u32| (cpus * per_cpu).max(1);
    // An older object (not strict) has its logs' size built in: the size it was built with.
    let timeline_slots = if strict { maps::timeline_slots(timeline_cpus) } else { maps::TIMELINE_SLOTS };
    let buckets = table::buckets_for(opts.max_flows);
    let mut ebpf = aya::EbpfLoader::new()
        .override_global(aya_log::LEVEL, &level, false)
        .override_global(maps::GLOBAL_TIMELINE_ON, &(opts.timeline as u8), strict)
        .override_global(maps::GLOBAL_TIMELINE_CPUS, &timeline_cpus, strict)
        .override_global(maps::GLOBAL_TIMELINE_SLOTS, &timeline_slots, strict)
        .override_global(maps::GLOBAL_EVENT_CPUS, &event_cpus, strict)
        .override_global(maps::GLOBAL_PMTU_DEFAULT, &opts.pmtu, strict)
        .override_global(maps::GLOBAL_MATCH_WINDOW_NS, &opts.match_window_ns, strict)
        .override_global(maps::GLOBAL_FILTER_ON, &(opts.filter.is_some() as u8), strict)
        .override_global(
            maps::GLOBAL_EVIDENCE_ON,
            &((opts.evidence_snaplen > 0) as u8),
            strict && opts.evidence_snaplen > 0,
        )
        .override_global(table::GLOBAL_FLOW_BUCKETS, &buckets, strict)
        .override_global(table::GLOBAL_MAX_FLOWS, &opts.max_flows, strict)
        .map_max_entries(table::MAP_FLOW_TAGS, buckets)
        .map_max_entries(table::MAP_FLOW_SLOTS, table::capacity(buckets))
        // An earlier release's object keeps its flows in a hash map and gives ids from a queue.
        .map_max_entries(maps::MAP_FLOWS, opts.max_flows)
        .map_max_entries(maps::MAP_FREE_FLOW_IDS, flow_ids(opts.max_flows))
        .map_max_entries(MAP_EVENTS, opts.ringbuf_bytes)
        .map_max_entries(maps::MAP_TIMELINE_LOG, entries(timeline_cpus, timeline_slots))
        .map_max_entries(maps::MAP_TIMELINE_HEADS, entries(timeline_cpus, maps::HEAD_STRIDE))
        .map_max_entries(maps::MAP_EVENT_LOG, entries(event_cpus, maps::EVENT_SLOTS))
        .map_max_entries(maps::MAP_EVENT_HEADS, entries(event_cpus, maps::HEAD_STRIDE))
        .load(object)
        .map_err(|e| {
            if has_errno(&e, &[libc::EPERM, libc::EACCES]) { KernelError::Permission } else { KernelError::Load(e) }
        })?;
    give_flow_ids(&mut ebpf, flow_ids(opts.max_flows))?;
    if let Some(filter) = opts.filter {
        let map_err = |source| KernelError::Map { map: maps::MAP_FILTER, source };
        let map = ebpf
            .map_mut(maps::MAP_FILTER)
            .ok_or(KernelError::MapLayout { map: maps::MAP_FILTER, what: "not in the object" })?;
        let mut array: aya::maps::Array<_, analyzer_common::filter::Filter> =
            aya::maps::Array::try_from(map).map_err(map_err)?;
        array.set(0, filter, 0).map_err(map_err)?;
    }
    if opts.evidence_snaplen > 0 {
        let map_err = |source| KernelError::Map { map: maps::MAP_EVIDENCE_CTL, source };
        let map = ebpf
            .map_mut(maps::MAP_EVIDENCE_CTL)
            .ok_or(KernelError::MapLayout { map: maps::MAP_EVIDENCE_CTL, what: "not in the object" })?;
        let mut array: aya::maps::Array<_, u64> = aya::maps::Array::try_from(map).map_err(map_err)?;
        array.set(maps::evidence_ctl::SNAPLEN, opts.evidence_snaplen as u64, 0).map_err(map_err)?;
    }
    for name in programs {
        load_program(&mut ebpf, name)?;
    }
    Ok(ebpf)
}

/// Loads (verifies) the program `name` of the object.
fn load_program(ebpf: &mut aya::Ebpf, name: &str) -> Result<(), KernelError> {
    let prog: &mut Xdp = ebpf
        .program_mut(name)
        .ok_or_else(|| KernelError::NoProgram(name.to_string()))?
        .try_into()
        .map_err(|source| KernelError::Program { name: name.to_string(), source })?;
    prog.load().map_err(|e| match e {
        // The verifier refuses with EACCES too: a log says it was the verifier, not privilege.
        aya::programs::ProgramError::LoadError { io_error, verifier_log }
            if !matches!(io_error.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
                || !verifier_log.to_string().trim().is_empty() =>
        {
            KernelError::Verifier { name: name.to_string(), log: verifier_log.to_string(), source: io_error }
        }
        e if has_errno(&e, &[libc::EPERM, libc::EACCES]) => KernelError::Permission,
        source => KernelError::Program { name: name.to_string(), source },
    })?;
    Ok(())
}

/// The flow ids an earlier release's program has to give: one per entry of its flow map,
/// below the agent's own ([`maps::AGENT_IDS`]).
fn flow_ids(max_flows: u32) -> u32 {
    max_flows.clamp(1, maps::AGENT_IDS - 1)
}

/// Fills the free-id queue of an earlier release's object with the ids 1..=`n`
/// ([`maps::MAP_FREE_FLOW_IDS`]); this build's has none (a flow's id is its slot's).
fn give_flow_ids(ebpf: &mut aya::Ebpf, n: u32) -> Result<(), KernelError> {
    let Some(map) = ebpf.map_mut(maps::MAP_FREE_FLOW_IDS) else { return Ok(()) };
    let map_err = |source| KernelError::Map { map: maps::MAP_FREE_FLOW_IDS, source };
    let mut queue: aya::maps::Queue<_, u32> = aya::maps::Queue::try_from(map).map_err(map_err)?;
    for id in 1..=n {
        queue.push(id, 0).map_err(map_err)?;
    }
    Ok(())
}

/// The borrowed fd of a loaded program (for `BPF_PROG_TEST_RUN`).
pub fn program_fd<'a>(ebpf: &'a aya::Ebpf, name: &str) -> Result<std::os::fd::BorrowedFd<'a>, KernelError> {
    let prog: &Xdp = ebpf
        .program(name)
        .ok_or_else(|| KernelError::NoProgram(name.to_string()))?
        .try_into()
        .map_err(|source| KernelError::Program { name: name.to_string(), source })?;
    let fd = prog.fd().map_err(|source| KernelError::Program { name: name.to_string(), source })?;
    Ok(std::os::fd::AsFd::as_fd(fd))
}

/// How to attach: native (driver) XDP, generic (skb), or native falling back to generic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    Native,
    Skb,
    Auto,
}

/// Whether to attach the multi-buffer (`xdp.frags`) program, the single-buffer one, or the
/// first the driver takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FragsMode {
    Auto,
    On,
    Off,
}

/// How the program was attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// "native" or "skb".
    pub mode: &'static str,
    /// The multi-buffer (`xdp.frags`) program, or the single-buffer one.
    pub frags: bool,
    /// Why an `auto` choice fell back (to generic XDP, or to the single-buffer program).
    pub fallback: Option<String>,
}

/// Attaches the analyzer program to `iface` through a bpf_link, which the kernel removes when
/// the process exits (SIGKILL included): in native mode first (unless `skb`), the multi-buffer
/// program first (unless `--xdp-frags off`), each `auto` choice falling back to the next when
/// refused, with the reason.
pub fn attach(ebpf: &mut aya::Ebpf, iface: &str, mode: AttachMode, frags: FragsMode) -> Result<Attached, KernelError> {
    let c = std::ffi::CString::new(iface).map_err(|_| KernelError::UnknownInterface(iface.into()))?;
    // SAFETY: c is a valid NUL-terminated string.
    if unsafe { libc::if_nametoindex(c.as_ptr()) } == 0 {
        return Err(KernelError::UnknownInterface(iface.into()));
    }
    let modes: &[(XdpMode, &'static str)] = match mode {
        AttachMode::Native => &[(XdpMode::Driver, "native")],
        AttachMode::Skb => &[(XdpMode::Skb, "skb")],
        AttachMode::Auto => &[(XdpMode::Driver, "native"), (XdpMode::Skb, "skb")],
    };
    let programs: &[(&str, bool)] = match frags {
        FragsMode::On => &[(maps::PROGRAM, true)],
        FragsMode::Off => &[(maps::PROGRAM_SINGLE, false)],
        FragsMode::Auto => &[(maps::PROGRAM, true), (maps::PROGRAM_SINGLE, false)],
    };
    let mut refused: Vec<String> = Vec::new();
    let mut last = None;
    for &(m, mode_name) in modes {
        for &(name, is_frags) in programs {
            let prog: &mut Xdp = ebpf
                .program_mut(name)
                .ok_or_else(|| KernelError::NoProgram(name.to_string()))?
                .try_into()
                .map_err(|source| KernelError::Program { name: name.to_string(), source })?;
            if prog.fd().is_err() {
                // Loaded (verified) only when it is needed: the single-buffer program.
                prog.load().map_err(|source| KernelError::Program { name: name.to_string(), source })?;
            }
            match prog.attach(iface, m) {
                Ok(_) => {
                    let fallback = (!refused.is_empty()).then(|| refused.join("; "));
                    return Ok(Attached { mode: mode_name, frags: is_frags, fallback });
                }
                Err(e) if has_errno(&e, &[libc::EBUSY, libc::EEXIST]) => {
                    return Err(KernelError::Busy { iface: iface.into() });
                }
                Err(e) if has_errno(&e, &[libc::EPERM, libc::EACCES]) => return Err(KernelError::Permission),
                Err(e) => {
                    let what = if is_frags { "multi-buffer" } else { "single-buffer" };
                    let err = if !is_frags && has_errno(&e, &[libc::ERANGE]) {
                        // A driver's answer to an MTU one buffer cannot hold (veth: ERANGE).
                        KernelError::MtuTooLarge { iface: iface.into(), mode: mode_name }
                    } else {
                        KernelError::Attach { iface: iface.into(), mode: mode_name, source: e }
                    };
                    refused.push(format!(
                        "{mode_name} XDP refused the {what} program: {}",
                        crate::model::error_chain(&err)
                    ));
                    last = Some(err);
                }
            }
        }
    }
    // (Every list above has an entry, so something was tried and refused.)
    Err(last.unwrap_or_else(|| KernelError::NoProgram(maps::PROGRAM.to_string())))
}

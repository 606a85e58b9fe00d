//! The XDP program as the host sees it: the embedded object, loading it with the map sizes
//! asked for, running it on test frames (`BPF_PROG_TEST_RUN`) and reading its maps.

pub(crate) mod access;
pub(crate) mod batch;
pub mod evidence;
pub mod flow_ids;
pub mod load;
pub mod logs;
pub mod snapshot;
mod table;
pub mod test_run;

/// The `bpf` system call: command `cmd` on `attr`, a prefix of `union bpf_attr` of its size;
/// the call's non-negative result (a new fd for the commands that make one). aya 0.14 wraps
/// neither test runs nor batch lookups: the few commands used without it go through here.
///
/// # Safety
/// The pointers in `attr` must be valid for what `cmd` reads and writes through them, for the
/// call's duration.
pub unsafe fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<i64> {
    // SAFETY: attr is a valid bpf_attr prefix of the size passed; its pointers are the caller's
    // to vouch for.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r) }
}

/// The XDP object, built by build.rs (from source, or the committed object).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/roce-analyzer"));

/// Errors of loading, attaching and reading the kernel program.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(
        "permission denied loading the XDP program: roce-analyzer needs CAP_BPF and CAP_NET_ADMIN \
         (run it as root, or grant them: setcap cap_bpf,cap_net_admin,cap_perfmon+ep roce-analyzer)"
    )]
    Permission,
    #[error(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): a kernel built with CONFIG_DEBUG_INFO_BTF is needed"
    )]
    NoBtf,
    #[error("loading the XDP object")]
    Load(#[source] aya::EbpfError),
    #[error("no XDP program {0} in the object")]
    NoProgram(String),
    #[error("XDP program {name}")]
    Program {
        name: String,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("the kernel verifier rejected the XDP program {name}: {log}")]
    Verifier {
        name: String,
        log: String,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the XDP program's log (aya-log)")]
    Log(#[source] aya_log::Error),
    #[error("unknown interface {0:?}")]
    UnknownInterface(String),
    #[error(
        "interface {iface} already has an XDP program attached (by another tool): detach it first \
         (`ip link set dev {iface} xdp off`) or choose another interface"
    )]
    Busy { iface: String },
    #[error(
        "attaching to {iface} in {mode} mode: the single-buffer XDP program cannot take the interface's MTU \
         (frames over a page need the multi-buffer program: --xdp-frags auto or on, or a smaller MTU)"
    )]
    MtuTooLarge { iface: String, mode: &'static str },
    #[error("attaching to {iface} in {mode} mode")]
    Attach {
        iface: String,
        mode: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("map {map}")]
    Map {
        map: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("map {map}")]
    MapIo {
        map: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("map {map}: {what}")]
    MapLayout { map: &'static str, what: &'static str },
    #[error("BPF_PROG_TEST_RUN: {0}")]
    TestRun(std::io::Error),
}

/// `clock` now, in ns (CLOCK_MONOTONIC is the XDP program's `bpf_ktime_get_ns`).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

//! Least privilege for the live agent: once the XDP program is loaded and attached, the
//! process keeps only what reading its maps and detaching need — CAP_BPF (the bpf() calls on
//! the maps; CAP_SYS_ADMIN on kernels before 5.8, which lack CAP_BPF) and CAP_NET_ADMIN
//! (detaching when the run ends) — and, when started as root with `--user`, runs as that user
//! from then on, before it parses a frame or serves HTTP.

use std::ffi::CString;

use caps::{CapSet, Capability, CapsHashSet};

/// What the agent keeps.
pub const KEPT: [Capability; 2] = [Capability::CAP_BPF, Capability::CAP_NET_ADMIN];

#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("--user {user}: no such user")]
    NoUser { user: String },
    #[error("--user {user}: only root can switch to another user")]
    NotRoot { user: String },
    #[error("{step}")]
    Os { step: &'static str, source: std::io::Error },
    #[error("{step}")]
    Caps { step: &'static str, source: caps::errors::CapsError },
}

fn os(step: &'static str) -> impl FnOnce(std::io::Error) -> PrivilegeError {
    move |source| PrivilegeError::Os { step, source }
}

fn check(step: &'static str, rc: libc::c_int) -> Result<(), PrivilegeError> {
    if rc == 0 { Ok(()) } else { Err(os(step)(std::io::Error::last_os_error())) }
}

/// Drops every capability but [`KEPT`] (from the bounding set too, so none can come back),
/// forbids gaining privileges, and switches to `user` when given.
pub fn drop_to(user: Option<&str>) -> Result<(), PrivilegeError> {
    let mut kept: CapsHashSet = KEPT.into_iter().collect();
    // Before Linux 5.8 there is no CAP_BPF: the bpf() calls need CAP_SYS_ADMIN there.
    if caps::has_cap(None, CapSet::Bounding, Capability::CAP_BPF).is_err() {
        kept.insert(Capability::CAP_SYS_ADMIN);
    }
    let caps_err = |step| move |source| PrivilegeError::Caps { step, source };
    let ids = match user {
        None => None,
        Some(name) => {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Err(PrivilegeError::NotRoot { user: name.into() });
            }
            let c = CString::new(name).map_err(|_| PrivilegeError::NoUser { user: name.into() })?;
            // SAFETY: a NUL-terminated name; the entry is read before any other passwd call.
            let pw = unsafe { libc::getpwnam(c.as_ptr()) };
            if pw.is_null() {
                return Err(PrivilegeError::NoUser { user: name.into() });
            }
            // SAFETY: non-null entry from getpwnam.
            Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
        }
    };
    // The bounding set first, while CAP_SETPCAP is still effective. Without it (a service
    // started unprivileged with ambient capabilities) the service manager bounded the set.
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        for c in caps::all() {
            if !kept.contains(&c) && caps::has_cap(None, CapSet::Bounding, c).unwrap_or(false) {
                caps::drop(None, CapSet::Bounding, c).map_err(caps_err("dropping from the bounding set"))?;
            }
        }
    }
    if let Some((uid, gid)) = ids {
        // Keep the permitted set across setuid; the effective set is raised again below.
        // SAFETY: prctl with integer arguments.
        check("prctl(PR_SET_KEEPCAPS)", unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) })?;
        // SAFETY: an empty group list.
        check("setgroups", unsafe { libc::setgroups(0, std::ptr::null()) })?;
        // SAFETY: plain ids.
        check("setgid", unsafe { libc::setgid(gid) })?;
        // SAFETY: plain id.
        check("setuid", unsafe { libc::setuid(uid) })?;
    }
    let have = caps::read(None, CapSet::Permitted).map_err(caps_err("reading the permitted set"))?;
    let keep: CapsHashSet = kept.intersection(&have).copied().collect();
    // Effective first: it must stay within the permitted set at every step. (After setuid it
    // is empty, and raising it within the kept permitted set is allowed.)
    caps::set(None, CapSet::Effective, &keep).map_err(caps_err("setting the effective set"))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(caps_err("setting the permitted set"))?;
    caps::clear(None, CapSet::Inheritable).map_err(caps_err("clearing the inheritable set"))?;
    let _ = caps::clear(None, CapSet::Ambient);
    // SAFETY: prctl with integer arguments.
    check("prctl(PR_SET_NO_NEW_PRIVS)", unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
    Ok(())
}

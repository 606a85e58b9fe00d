//! `BPF_MAP_LOOKUP_BATCH` and `BPF_MAP_DELETE_ELEM` on a map fd (aya 0.14 has neither batch
//! operations nor raw access to per-CPU bytes). Reading 10 k flows element by element costs
//! two syscalls each; a batch reads thousands per syscall.

use std::os::fd::{AsRawFd, BorrowedFd};

const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// The `batch` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// The `map_elem` member of `union bpf_attr` (for delete).
#[repr(C, align(8))]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Calls `f(key, value)` for every element of a hash map; `value_len` is the size of one
/// element's value as the kernel copies it (for per-CPU maps: round_up(size, 8) × possible
/// CPUs).
pub fn for_each(
    fd: BorrowedFd<'_>,
    key_len: usize,
    value_len: usize,
    mut f: impl FnMut(&[u8], &[u8]),
) -> std::io::Result<()> {
    let mut chunk: usize = 1024;
    // The hash map's batch token is a u32 bucket index.
    let mut token = [0u64; 1];
    let mut next = [0u64; 1];
    let mut started = false;
    loop {
        let mut keys = vec![0u8; key_len * chunk];
        let mut values = vec![0u8; value_len * chunk];
        let mut attr = BatchAttr {
            in_batch: if started { token.as_ptr() as u64 } else { 0 },
            out_batch: next.as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: fd.as_raw_fd() as u32,
            ..Default::default()
        };
        // SAFETY: the token, keys and values buffers hold `chunk` elements of the sizes given.
        let r = unsafe { super::sys_bpf(BPF_MAP_LOOKUP_BATCH, &mut attr) }.map(drop);
        for i in 0..attr.count as usize {
            f(&keys[i * key_len..(i + 1) * key_len], &values[i * value_len..(i + 1) * value_len]);
        }
        match r {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            // A bucket holds more elements than the chunk: retry it with a larger one.
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && attr.count == 0 => {
                chunk *= 4;
                continue;
            }
            Err(e) => return Err(e),
        }
        token = next;
        started = true;
    }
}

/// Deletes `key` from the map; a key that is already gone is not an error.
pub fn delete(fd: BorrowedFd<'_>, key: &[u8]) -> std::io::Result<()> {
    let mut attr = ElemAttr { map_fd: fd.as_raw_fd() as u32, key: key.as_ptr() as u64, ..Default::default() };
    // SAFETY: `key` is the map's key size (the caller's fd and key belong together).
    match unsafe { super::sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr) }.map(drop) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r,
    }
}

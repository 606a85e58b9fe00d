//! NIC counters, for hosts whose RNIC moves RoCE without the kernel: the RDMA ports' hardware
//! counters (`/sys/class/infiniband/DEV/ports/N/hw_counters` and `counters`, as mlx5 and other
//! drivers publish them: np_cnp_sent, rp_cnp_handled, np_ecn_marked_roce_packets,
//! out_of_sequence, duplicate_request, packet_seq_err, local_ack_timeout_err, …) and the
//! netdev driver's statistics through the ethtool ioctl (mlx5: rx_prio3_pause,
//! rx_prio3_pause_duration, tx_prio3_pause, …).

use std::collections::BTreeMap;
use std::path::Path;

/// Counters of one RDMA port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaPort {
    pub device: String,
    pub port: String,
    pub counters: BTreeMap<String, u64>,
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn read_counters(dir: &Path, into: &mut BTreeMap<String, u64>) {
    for name in entries(dir) {
        if let Ok(text) = std::fs::read_to_string(dir.join(&name))
            && let Ok(v) = text.trim().parse::<u64>()
        {
            into.insert(name, v);
        }
    }
}

/// Whether the RDMA port belongs to `iface`: its GID table names the netdev, or the netdev's
/// parent device has this RDMA device.
fn port_of(sysfs: &Path, device: &str, port_dir: &Path, iface: &str) -> bool {
    let ndevs = port_dir.join("gid_attrs/ndevs");
    let by_gid =
        entries(&ndevs).iter().any(|g| std::fs::read_to_string(ndevs.join(g)).is_ok_and(|n| n.trim() == iface));
    by_gid || sysfs.join("class/net").join(iface).join("device/infiniband").join(device).exists()
}

/// The RDMA ports (of `iface`, or all) under `sysfs` with their counters.
pub fn read_rdma(sysfs: &Path, iface: Option<&str>) -> Vec<RdmaPort> {
    let root = sysfs.join("class/infiniband");
    let mut out = Vec::new();
    for device in entries(&root) {
        for port in entries(&root.join(&device).join("ports")) {
            let dir = root.join(&device).join("ports").join(&port);
            if iface.is_some_and(|i| !port_of(sysfs, &device, &dir, i)) {
                continue;
            }
            let mut counters = BTreeMap::new();
            read_counters(&dir.join("counters"), &mut counters);
            read_counters(&dir.join("hw_counters"), &mut counters);
            out.push(RdmaPort { device: device.clone(), port, counters });
        }
    }
    out
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ethtool_ioctl(sock: i32, iface: &str, buf: &mut [u64]) -> std::io::Result<()> {
    let mut req = IfReq { name: [0; 16], data: buf.as_mut_ptr() as *mut libc::c_void, _pad: [0; 16] };
    let n = iface.len().min(15);
    req.name[..n].copy_from_slice(&iface.as_bytes()[..n]);
    // SAFETY: req is a valid ifreq whose data points at `buf`, sized by the caller for the
    // command in its first word.
    if unsafe { libc::ioctl(sock, SIOCETHTOOL, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The driver statistics of `iface` (what `ethtool -S` shows).
pub fn read_ethtool(iface: &str) -> std::io::Result<BTreeMap<String, u64>> {
    // SAFETY: plain socket creation; closed below.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if sock < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let result = (|| {
        // struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[] }
        let mut info = [0u64; 3];
        info[0] = ETHTOOL_GSSET_INFO as u64;
        info[1] = 1 << ETH_SS_STATS;
        ethtool_ioctl(sock, iface, &mut info)?;
        let n = (info[2] & 0xFFFF_FFFF) as usize;
        // struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[] }
        let mut strings = vec![0u64; (12 + n * ETH_GSTRING_LEN).div_ceil(8) + 1];
        strings[0] = ETHTOOL_GSTRINGS as u64 | ((ETH_SS_STATS as u64) << 32);
        strings[1] = n as u64;
        ethtool_ioctl(sock, iface, &mut strings)?;
        // struct ethtool_stats { u32 cmd, n_stats; u64 data[] }
        let mut stats = vec![0u64; 1 + n];
        stats[0] = ETHTOOL_GSTATS as u64 | ((n as u64) << 32);
        ethtool_ioctl(sock, iface, &mut stats)?;
        // SAFETY: `strings` is a u64 buffer of at least 12 + n × 32 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(strings.as_ptr() as *const u8, strings.len() * 8) };
        let mut out = BTreeMap::new();
        for i in 0..n {
            let raw = &bytes[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
            let name = String::from_utf8_lossy(&raw[..raw.iter().position(|b| *b == 0).unwrap_or(raw.len())]);
            out.insert(name.into_owned(), stats[1 + i]);
        }
        Ok(out)
    })();
    // SAFETY: our own socket.
    unsafe { libc::close(sock) };
    result
}

/// `end − start` per counter (counters that went down, e.g. a driver reset, count from 0).
pub fn delta(start: &BTreeMap<String, u64>, end: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    end.iter()
        .map(|(k, v)| {
            let s = start.get(k).copied().unwrap_or(0);
            (k.clone(), if *v >= s { v - s } else { *v })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, v: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    }

    /// A sysfs tree with the file names mlx5 publishes.
    #[test]
    fn mlx5_counters_of_the_interface() {
        let sys = tempfile::tempdir().unwrap();
        let ib = sys.path().join("class/infiniband");
        let p0 = ib.join("mlx5_0/ports/1");
        for (name, v) in [
            ("np_cnp_sent", "120\n"),
            ("rp_cnp_handled", "118\n"),
            ("np_ecn_marked_roce_packets", "640\n"),
            ("out_of_sequence", "3\n"),
            ("duplicate_request", "2\n"),
            ("packet_seq_err", "1\n"),
            ("local_ack_timeout_err", "0\n"),
            ("rnr_nak_retry_err", "0\n"),
        ] {
            write(&p0.join("hw_counters").join(name), v);
        }
        write(&p0.join("counters/port_xmit_data"), "123456789\n");
        write(&p0.join("counters/port_rcv_data"), "987654321\n");
        write(&p0.join("counters/symbol_error"), "N/A (no PMA)\n");
        write(&p0.join("gid_attrs/ndevs/0"), "eth0\n");
        write(&p0.join("gid_attrs/ndevs/1"), "eth0\n");
        let p1 = ib.join("mlx5_1/ports/1");
        write(&p1.join("hw_counters/np_cnp_sent"), "7\n");
        std::fs::create_dir_all(sys.path().join("class/net/eth1/device/infiniband/mlx5_1")).unwrap();

        let ports = read_rdma(sys.path(), Some("eth0"));
        assert_eq!(ports.len(), 1);
        assert_eq!((ports[0].device.as_str(), ports[0].port.as_str()), ("mlx5_0", "1"));
        let c = &ports[0].counters;
        assert_eq!((c["np_cnp_sent"], c["rp_cnp_handled"], c["np_ecn_marked_roce_packets"]), (120, 118, 640));
        assert_eq!((c["out_of_sequence"], c["duplicate_request"], c["packet_seq_err"]), (3, 2, 1));
        assert_eq!(c["port_xmit_data"], 123456789);
        assert!(!c.contains_key("symbol_error"), "non-numeric files are skipped");
        let eth1 = read_rdma(sys.path(), Some("eth1"));
        assert_eq!((eth1.len(), eth1[0].device.as_str(), eth1[0].counters["np_cnp_sent"]), (1, "mlx5_1", 7));
        assert_eq!(read_rdma(sys.path(), None).len(), 2);
        assert!(read_rdma(sys.path(), Some("veth0")).is_empty());
    }

    #[test]
    fn deltas() {
        let a = BTreeMap::from([("x".to_string(), 10), ("y".to_string(), 5)]);
        let b = BTreeMap::from([("x".to_string(), 15), ("y".to_string(), 2), ("z".to_string(), 4)]);
        assert_eq!(delta(&a, &b), BTreeMap::from([("x".into(), 5), ("y".into(), 2), ("z".into(), 4)]));
    }
}

/// NIC counters at the start of a run, to report increments against.
#[derive(Debug, Clone)]
pub struct NicBaseline {
    iface: String,
    sysfs: std::path::PathBuf,
    rdma: Vec<RdmaPort>,
    netdev: Result<BTreeMap<String, u64>, String>,
}

impl NicBaseline {
    pub fn read(sysfs: &Path, iface: &str) -> Self {
        NicBaseline {
            iface: iface.into(),
            sysfs: sysfs.into(),
            rdma: read_rdma(sysfs, Some(iface)),
            netdev: read_ethtool(iface).map_err(|e| e.to_string()),
        }
    }

    /// Reads the counters now and returns their increments since the baseline.
    pub fn since(&self) -> crate::model::Nic {
        let now = NicBaseline::read(&self.sysfs, &self.iface);
        let rdma = now
            .rdma
            .iter()
            .map(|p| {
                let start = self.rdma.iter().find(|s| s.device == p.device && s.port == p.port);
                crate::model::NicPort {
                    device: p.device.clone(),
                    port: p.port.clone(),
                    counters: start.map_or_else(|| p.counters.clone(), |s| delta(&s.counters, &p.counters)),
                }
            })
            .collect();
        let (counters, error) = match (&self.netdev, &now.netdev) {
            (Ok(s), Ok(n)) => (delta(s, n), None),
            (Err(e), _) | (_, Err(e)) => (BTreeMap::new(), Some(e.clone())),
        };
        crate::model::Nic { rdma, netdev: crate::model::NicNetdev { name: self.iface.clone(), counters, error } }
    }
}

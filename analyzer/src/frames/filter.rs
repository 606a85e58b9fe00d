//! The `--filter` language, parsed into the [`Filter`] the XDP program and the host both apply
//! ([`Filter::admits`], in `analyzer-common`).
//!
//! ```text
//! FILTER := TERM ( ("," | " ") TERM )*          every term must hold
//! TERM   := KEY "=" VALUE ( "|" VALUE )*        one of the values
//! src, dst, host, origin = ADDRESS[/LEN]        IPv4 or IPv6; host: either end; origin: the
//!                                               outer source of a GRE/ERSPAN mirror copy
//! qp     = N | 0xN                              destination QP (24 bits)
//! dscp   = N | N-M                              0..63
//! pcp    = N | N-M                              0..7, the outer VLAN tag's priority (alias prio)
//! vlan   = N | none                             outer VLAN id 0..4095; none: untagged
//! ```
//!
//! e.g. `src=10.0.0.0/24|10.0.1.0/24,dscp=26` or `host=fd00::1 qp=0x110`. A key given twice is
//! an error (join its values with `|`). PFC and PAUSE frames always pass.

use std::net::IpAddr;

use analyzer_common::filter::{Filter, MAX_VALUES, Prefix, flag};

/// A parsed `--filter`: the text as given (for the report) and the filter.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterSpec {
    pub text: String,
    pub filter: Filter,
}

fn prefix(v: &str) -> Result<Prefix, String> {
    let (addr, len) = match v.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u8>().map_err(|_| format!("{v:?}: the prefix length is not a number"))?)),
        None => (v, None),
    };
    let ip: IpAddr = addr.parse().map_err(|_| format!("{v:?}: not an IPv4 or IPv6 address"))?;
    let mut bytes = [0u8; 16];
    let (version, bits) = match ip {
        IpAddr::V4(a) => {
            bytes[..4].copy_from_slice(&a.octets());
            (4, 32)
        }
        IpAddr::V6(a) => {
            bytes = a.octets();
            (6, 128)
        }
    };
    let len = len.unwrap_or(bits);
    if len > bits {
        return Err(format!("{v:?}: an IPv{version} prefix is at most /{bits}"));
    }
    Ok(Prefix::new(version, &bytes, len))
}

fn number(v: &str, max: u32, what: &str) -> Result<u32, String> {
    let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => v.parse(),
    }
    .map_err(|_| format!("{v:?}: not a {what}"))?;
    if n > max {
        return Err(format!("{v:?}: a {what} is at most {max}"));
    }
    Ok(n)
}

/// `N` or `N-M` as a bit mask.
fn mask(v: &str, max: u32, what: &str) -> Result<u64, String> {
    let (lo, hi) = match v.split_once('-') {
        Some((a, b)) => (number(a, max, what)?, number(b, max, what)?),
        None => {
            let n = number(v, max, what)?;
            (n, n)
        }
    };
    if lo > hi {
        return Err(format!("{v:?}: a range runs from low to high"));
    }
    Ok((lo..=hi).fold(0u64, |m, i| m | 1 << i))
}

/// Puts `values` into a fixed list, or says there are too many.
fn fill<T: Copy>(list: &mut [T; MAX_VALUES], n: &mut u8, values: Vec<T>, key: &str) -> Result<(), String> {
    if values.len() > MAX_VALUES {
        return Err(format!("{key}: at most {MAX_VALUES} values"));
    }
    for (slot, v) in list.iter_mut().zip(&values) {
        *slot = *v;
    }
    *n = values.len() as u8;
    Ok(())
}

impl FilterSpec {
    pub fn parse(text: &str) -> Result<FilterSpec, String> {
        let mut f = Filter::zeroed();
        let mut seen: Vec<&str> = Vec::new();
        let terms: Vec<&str> = text.split([',', ' ']).filter(|t| !t.is_empty()).collect();
        if terms.is_empty() {
            return Err("an empty filter (e.g. src=10.0.0.0/24,dscp=26)".into());
        }
        for term in terms {
            let (key, values) = term.split_once('=').ok_or_else(|| format!("{term:?}: expected KEY=VALUE"))?;
            let key = match key {
                "prio" | "priority" => "pcp",
                k => k,
            };
            if seen.contains(&key) {
                return Err(format!("{key} is given twice: join its values with | (e.g. {key}=A|B)"));
            }
            seen.push(key);
            let values: Vec<&str> = values.split('|').collect();
            if values.iter().any(|v| v.is_empty()) {
                return Err(format!("{term:?}: an empty value"));
            }
            let prefixes = || values.iter().map(|v| prefix(v)).collect::<Result<Vec<_>, _>>();
            match key {
                "src" => fill(&mut f.src, &mut f.n_src, prefixes()?, key)?,
                "dst" => fill(&mut f.dst, &mut f.n_dst, prefixes()?, key)?,
                "host" => fill(&mut f.host, &mut f.n_host, prefixes()?, key)?,
                "origin" => fill(&mut f.origin, &mut f.n_origin, prefixes()?, key)?,
                "qp" => {
                    let qps = values.iter().map(|v| number(v, 0xFF_FFFF, "QP number")).collect::<Result<_, _>>()?;
                    fill(&mut f.qp, &mut f.n_qp, qps, key)?
                }
                "dscp" => {
                    f.dscp = values.iter().map(|v| mask(v, 63, "DSCP")).try_fold(0, |m, b| b.map(|b| m | b))?;
                    f.flags |= flag::DSCP;
                }
                "pcp" => {
                    f.pcp = values.iter().map(|v| mask(v, 7, "PCP")).try_fold(0, |m, b| b.map(|b| m | b))? as u8;
                    f.flags |= flag::PCP;
                }
                "vlan" => {
                    let mut ids = Vec::new();
                    for v in &values {
                        match *v {
                            "none" | "untagged" => f.flags |= flag::UNTAGGED,
                            v => ids.push(number(v, 4095, "VLAN id")? as u16),
                        }
                    }
                    fill(&mut f.vlan, &mut f.n_vlan, ids, key)?
                }
                other => {
                    return Err(format!("{other:?}: not a filter key (src, dst, host, origin, qp, dscp, pcp, vlan)"));
                }
            }
        }
        Ok(FilterSpec { text: text.trim().to_string(), filter: f })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer_common::{FrameClass, PacketSummary};

    fn frame(src: [u8; 4], dst: [u8; 4]) -> PacketSummary {
        let mut s = PacketSummary::zeroed();
        s.class = FrameClass::Roce as u8;
        s.ip_version = 4;
        s.roce_version = 2;
        s.src_ip[..4].copy_from_slice(&src);
        s.dst_ip[..4].copy_from_slice(&dst);
        s.dst_qp = 0x110;
        s.dscp = 26;
        s
    }

    fn admits(filter: &str, s: &PacketSummary) -> bool {
        FilterSpec::parse(filter).unwrap().filter.admits(s)
    }

    #[test]
    fn terms_and_values() {
        let s = frame([10, 0, 0, 1], [10, 0, 1, 2]);
        assert!(admits("src=10.0.0.0/24", &s));
        assert!(!admits("src=10.0.1.0/24", &s));
        assert!(admits("src=10.0.1.0/24|10.0.0.1", &s), "any value");
        assert!(admits("dst=10.0.0.0/16,dscp=26", &s));
        assert!(!admits("dst=10.0.0.0/16,dscp=24", &s), "every term");
        assert!(admits("dscp=24-27 qp=0x110", &s));
        assert!(admits("qp=272|273", &s) && !admits("qp=273", &s), "decimal 272 is 0x110");
        assert!(admits("host=10.0.1.2", &s) && admits("host=10.0.0.1/32", &s) && !admits("host=10.9.0.0/16", &s));
        assert!(admits("src=0.0.0.0/0", &s), "/0 is every IPv4 address");
        assert!(!admits("src=::/0", &s), "an IPv6 prefix holds no IPv4 address");
        // Fields the frame lacks fail their terms: no VLAN tag, no mirror origin.
        assert!(!admits("pcp=3", &s) && !admits("vlan=100", &s) && !admits("origin=192.0.2.1", &s));
        assert!(admits("vlan=none", &s) && admits("vlan=100|none", &s));
        let mut tagged = s;
        (tagged.vlan_tags, tagged.vlan_id, tagged.pcp) = (1, 100, 3);
        assert!(admits("vlan=100 pcp=3", &tagged) && admits("prio=2-4", &tagged) && !admits("vlan=none", &tagged));
        let mut copy = s;
        copy.encap = 4;
        copy.origin_ip[..4].copy_from_slice(&[192, 0, 2, 1]);
        assert!(admits("origin=192.0.2.0/30", &copy) && !admits("origin=192.0.2.2", &copy));
    }

    #[test]
    fn ipv6_and_fabric_frames() {
        let mut s = PacketSummary::zeroed();
        s.class = FrameClass::Roce as u8;
        s.ip_version = 6;
        s.roce_version = 2;
        s.src_ip = "fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert!(admits("src=fd00::/64", &s) && !admits("src=fd01::/64", &s) && !admits("src=10.0.0.0/8", &s));
        // PFC frames belong to the fabric: they pass every filter.
        let mut pfc = PacketSummary::zeroed();
        pfc.class = FrameClass::Pfc as u8;
        assert!(admits("src=10.0.0.0/8,qp=5,vlan=7", &pfc));
        // A frame without IP fails address and DSCP terms.
        let mut arp = PacketSummary::zeroed();
        arp.class = FrameClass::NonRoce as u8;
        assert!(!admits("dscp=0", &arp) && !admits("src=0.0.0.0/0", &arp));
    }

    #[test]
    fn errors_name_the_term() {
        for (bad, says) in [
            ("", "empty filter"),
            ("src", "KEY=VALUE"),
            ("src=10.0.0.0/33", "at most /32"),
            ("src=fd00::/129", "at most /128"),
            ("src=10.0.0.300", "not an IPv4"),
            ("dscp=64", "at most 63"),
            ("dscp=30-20", "low to high"),
            ("pcp=8", "at most 7"),
            ("vlan=4096", "at most 4095"),
            ("qp=0x1000000", "at most"),
            ("src=1.1.1.1|2.2.2.2|3.3.3.3|4.4.4.4|5.5.5.5", "at most 4 values"),
            ("src=1.1.1.1,src=2.2.2.2", "given twice"),
            ("port=4791", "not a filter key"),
            ("src=1.1.1.1|", "empty value"),
        ] {
            let e = FilterSpec::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}

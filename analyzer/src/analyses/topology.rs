//! The fabric's topology (`--topology FILE`, TOML): devices with their port MACs, hosts with
//! MAC and IP, and the links between device ports and hosts. It names PFC senders, finds whom a
//! pause frame pauses (the link peer of the sending port) and the path of a flow.
//!
//! ```toml
//! [[device]]
//! name = "leaf1"
//! ports = { p1 = "02:00:00:00:07:d1", p5 = "02:00:00:00:07:d5" }
//! [[host]]
//! name = "h1"
//! mac = "02:00:00:00:03:e9"
//! ip = "10.2.0.1"
//! [[link]]
//! a = "leaf1:p1"
//! b = "h1"
//! [[vantage]]          # a capture labelled "up1" (or mirrored from 192.0.2.1) shows this link
//! label = "up1"        # or: origin = "192.0.2.1"
//! link = "leaf1:p1"
//! ```
//!
//! A flow seen at vantage points tied to links takes those links: its path is then the
//! shortest one through them (in the order they are reached), not merely the shortest.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("{path}: cannot read")]
    Read { path: PathBuf, source: crate::capture::bounded::BoundedError },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: line {line}: {message}")]
    Invalid { path: PathBuf, line: usize, message: String },
}

/// Characters of a TOML error's message kept (it may quote a key of any length).
const MESSAGE_MAX: usize = 200;

/// A TOML error as one line, "line L, column C: what", without the toml crate's drawing of
/// the line (which quotes the line whole: a 50 MB unterminated string made a 100 MB message).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = crate::capture::bounded::excerpt(e.message().trim_end().replace('\n', " "), MESSAGE_MAX);
    let Some(at) = e.span().map(|s| s.start.min(text.len())) else { return message };
    let before = text.get(..at).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {message}")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    device: Vec<RawDevice>,
    #[serde(default)]
    host: Vec<RawHost>,
    #[serde(default)]
    link: Vec<RawLink>,
    #[serde(default)]
    vantage: Vec<RawVantage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVantage {
    label: Option<Spanned<String>>,
    origin: Option<Spanned<String>>,
    link: Spanned<String>,
}

/// A vantage point tied to the link it shows: by input label, by mirror origin (the outer
/// source address, with or without `/session N`), or both.
#[derive(Debug, Clone)]
pub struct VantageTie {
    pub label: Option<String>,
    pub origin: Option<String>,
    pub link: End,
}

impl VantageTie {
    /// Whether a point (its label, and origin for mirrored copies) is this one.
    pub fn matches(&self, label: &str, origin: Option<&str>) -> bool {
        let label_ok = self.label.as_deref().is_none_or(|l| l == label);
        let origin_ok = match (&self.origin, origin) {
            (None, _) => true,
            (Some(want), Some(o)) => o == want || o.strip_prefix(want.as_str()).is_some_and(|r| r.starts_with('/')),
            (Some(_), None) => false,
        };
        label_ok && origin_ok
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Spanned<String>,
    #[serde(default)]
    ports: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Spanned<String>,
    mac: Spanned<String>,
    ip: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: Spanned<String>,
    b: Spanned<String>,
}

/// A node of the fabric graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    Device(usize),
    Host(usize),
}

/// One end of a link: a device port or a host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    Port(usize, String),
    Host(usize),
}

impl End {
    pub fn node(&self) -> Node {
        match self {
            End::Port(d, _) => Node::Device(*d),
            End::Host(h) => Node::Host(*h),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    pub ports: BTreeMap<String, [u8; 6]>,
}

#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub mac: [u8; 6],
    pub ip: IpAddr,
}

#[derive(Debug, Clone, Default)]
pub struct Topology {
    pub devices: Vec<Device>,
    pub hosts: Vec<Host>,
    by_mac: HashMap<[u8; 6], End>,
    by_ip: HashMap<IpAddr, usize>,
    peer: HashMap<End, End>,
    /// Node → (neighbour, the end on this node's side), sorted for deterministic paths.
    adjacent: BTreeMap<Node, Vec<(Node, End)>>,
    /// `[[vantage]]` entries: the links vantage points show.
    pub vantage: Vec<VantageTie>,
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        if p.len() != 2 {
            return None;
        }
        m[i] = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}

impl Topology {
    pub fn load(path: &Path, max: u64) -> Result<Topology, TopologyError> {
        let read = |source| TopologyError::Read { path: path.into(), source };
        let bytes = crate::capture::bounded::read(path, max, "a topology").map_err(read)?;
        let text = String::from_utf8(bytes)
            .map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()).into()))?;
        Topology::parse(&text).map_err(|e| match e {
            TopologyError::Parse { message, .. } => TopologyError::Parse { path: path.into(), message },
            TopologyError::Invalid { line, message, .. } => TopologyError::Invalid { path: path.into(), line, message },
            e => e,
        })
    }

    /// Parses and checks a topology: unknown names, duplicate MACs and ports linked twice are
    /// refused with the line they are on.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let raw: RawFile = toml::from_str(text)
            .map_err(|e| TopologyError::Parse { path: PathBuf::new(), message: toml_error(text, &e) })?;
        let mut p = Parse { text, t: Topology::default(), names: HashMap::new() };
        for d in &raw.device {
            p.device(d)?;
        }
        for h in &raw.host {
            p.host(h)?;
        }
        for l in &raw.link {
            p.link(l)?;
        }
        for v in p.t.adjacent.values_mut() {
            v.sort();
        }
        for v in &raw.vantage {
            p.vantage(v)?;
        }
        Ok(p.t)
    }

    /// The device port or host that owns a MAC.
    pub fn owner(&self, mac: &[u8; 6]) -> Option<&End> {
        self.by_mac.get(mac)
    }

    /// The other end of the link at `end`.
    pub fn peer(&self, end: &End) -> Option<&End> {
        self.peer.get(end)
    }

    pub fn host_of_ip(&self, ip: IpAddr) -> Option<usize> {
        self.by_ip.get(&ip).copied()
    }

    /// The link a PFC sender's pauses stop: (the sender's node, the peer it stops). A flow
    /// from the peer through the sender crossed it ([`crosses`]).
    pub fn paused_link(&self, mac: &[u8; 6]) -> Option<(Node, Node)> {
        let from = self.owner(mac)?;
        Some((from.node(), self.peer(from)?.node()))
    }

    /// The path between two addresses (16 bytes, IPv4 in the first four) of the hosts the
    /// topology places; None when it places either not.
    pub fn path_of(&self, ip_version: u8, src: &[u8; 16], dst: &[u8; 16]) -> Option<Vec<Node>> {
        let ip =
            |b: &[u8; 16]| -> IpAddr { if ip_version == 4 { [b[0], b[1], b[2], b[3]].into() } else { (*b).into() } };
        self.path(Node::Host(self.host_of_ip(ip(src))?), Node::Host(self.host_of_ip(ip(dst))?))
    }

    pub fn name(&self, n: Node) -> &str {
        match n {
            Node::Device(d) => &self.devices[d].name,
            Node::Host(h) => &self.hosts[h].name,
        }
    }

    /// A shortest path from `a` to `b` (BFS, neighbours in name order), both included.
    pub fn path(&self, a: Node, b: Node) -> Option<Vec<Node>> {
        let mut prev: HashMap<Node, Node> = HashMap::new();
        let mut queue = VecDeque::from([a]);
        let mut seen = std::collections::HashSet::from([a]);
        while let Some(n) = queue.pop_front() {
            if n == b {
                let mut p = vec![b];
                let mut cur = b;
                while let Some(&q) = prev.get(&cur) {
                    p.push(q);
                    cur = q;
                }
                p.reverse();
                return Some(p);
            }
            for (m, _) in self.adjacent.get(&n).into_iter().flatten() {
                if seen.insert(*m) {
                    prev.insert(*m, n);
                    queue.push_back(*m);
                }
            }
        }
        None
    }

    /// The links the vantage points `seen_at` (label, origin) show, per `[[vantage]]`.
    pub fn links_seen(&self, seen_at: &[(String, Option<String>)]) -> Vec<End> {
        let mut links: Vec<End> = self
            .vantage
            .iter()
            .filter(|v| seen_at.iter().any(|(l, o)| v.matches(l, o.as_deref())))
            .map(|v| v.link.clone())
            .collect();
        links.sort();
        links.dedup();
        links
    }

    /// A shortest path from `a` to `b` that crosses each of `links` (each an end of a link),
    /// taken in the order they are reached from `a`.
    pub fn path_via(&self, a: Node, b: Node, links: &[End]) -> Option<Vec<Node>> {
        let dist = |from: Node, to: Node| self.path(from, to).map_or(usize::MAX, |p| p.len());
        let mut hops: Vec<(Node, Node)> = links.iter().filter_map(|e| Some((e.node(), self.peer(e)?.node()))).collect();
        hops.sort_by_key(|&(x, y)| (dist(a, x).min(dist(a, y)), x, y));
        let mut path = vec![a];
        let mut cur = a;
        for (x, y) in hops {
            let (near, far) = if dist(cur, x) <= dist(cur, y) { (x, y) } else { (y, x) };
            path.extend(&self.path(cur, near)?[1..]);
            path.push(far);
            cur = far;
        }
        path.extend(&self.path(cur, b)?[1..]);
        Some(path)
    }

    /// The port of device `d` on the first hop of a shortest path toward `target`.
    pub fn port_toward(&self, d: usize, target: Node) -> Option<String> {
        let p = self.path(Node::Device(d), target)?;
        let next = *p.get(1)?;
        self.adjacent.get(&Node::Device(d))?.iter().find(|(m, _)| *m == next).and_then(|(_, e)| match e {
            End::Port(_, port) => Some(port.clone()),
            End::Host(_) => None,
        })
    }
}

/// One parse of a topology file: its text (for the lines errors name), the topology so far
/// and the names given.
struct Parse<'t> {
    text: &'t str,
    t: Topology,
    names: HashMap<String, Node>,
}

impl Parse<'_> {
    /// An error at `span` of the text, with its line.
    fn invalid(&self, span: std::ops::Range<usize>, message: String) -> TopologyError {
        let line = self.text[..span.start.min(self.text.len())].matches('\n').count() + 1;
        TopologyError::Invalid { path: PathBuf::new(), line, message }
    }

    fn device(&mut self, d: &RawDevice) -> Result<(), TopologyError> {
        let name = d.name.get_ref().clone();
        let i = self.t.devices.len();
        if self.names.insert(name.clone(), Node::Device(i)).is_some() {
            return Err(self.invalid(d.name.span(), format!("name {name:?} is used twice")));
        }
        let mut ports = BTreeMap::new();
        for (port, mac) in &d.ports {
            let m = parse_mac(mac.get_ref()).ok_or_else(|| {
                self.invalid(mac.span(), format!("{name}:{port}: {:?} is not a MAC address", mac.get_ref()))
            })?;
            if self.t.by_mac.insert(m, End::Port(i, port.clone())).is_some() {
                return Err(self.invalid(mac.span(), format!("MAC {} appears twice", mac.get_ref())));
            }
            ports.insert(port.clone(), m);
        }
        self.t.devices.push(Device { name, ports });
        Ok(())
    }

    fn host(&mut self, h: &RawHost) -> Result<(), TopologyError> {
        let name = h.name.get_ref().clone();
        let i = self.t.hosts.len();
        if self.names.insert(name.clone(), Node::Host(i)).is_some() {
            return Err(self.invalid(h.name.span(), format!("name {name:?} is used twice")));
        }
        let mac = parse_mac(h.mac.get_ref()).ok_or_else(|| {
            self.invalid(h.mac.span(), format!("host {name}: {:?} is not a MAC address", h.mac.get_ref()))
        })?;
        if self.t.by_mac.insert(mac, End::Host(i)).is_some() {
            return Err(self.invalid(h.mac.span(), format!("MAC {} appears twice", h.mac.get_ref())));
        }
        let ip: IpAddr = h.ip.get_ref().parse().map_err(|_| {
            self.invalid(h.ip.span(), format!("host {name}: {:?} is not an IP address", h.ip.get_ref()))
        })?;
        if self.t.by_ip.insert(ip, i).is_some() {
            return Err(self.invalid(h.ip.span(), format!("IP {ip} appears twice")));
        }
        self.t.hosts.push(Host { name, mac, ip });
        Ok(())
    }

    fn link(&mut self, l: &RawLink) -> Result<(), TopologyError> {
        let mut ends = Vec::new();
        for s in [&l.a, &l.b] {
            let text = s.get_ref();
            let end = match text.split_once(':') {
                Some((dev, port)) => match self.names.get(dev) {
                    Some(Node::Device(d)) if self.t.devices[*d].ports.contains_key(port) => End::Port(*d, port.into()),
                    Some(Node::Device(_)) => {
                        return Err(self.invalid(s.span(), format!("device {dev} has no port {port:?}")));
                    }
                    _ => return Err(self.invalid(s.span(), format!("unknown device {dev:?} in {text:?}"))),
                },
                None => match self.names.get(text.as_str()) {
                    Some(Node::Host(h)) => End::Host(*h),
                    Some(Node::Device(_)) => {
                        return Err(self
                            .invalid(s.span(), format!("{text:?} is a device: name one of its ports (device:port)")));
                    }
                    None => return Err(self.invalid(s.span(), format!("unknown host {text:?}"))),
                },
            };
            if let End::Port(..) = end
                && self.t.peer.contains_key(&end)
            {
                return Err(self.invalid(s.span(), format!("port {text} is linked twice")));
            }
            ends.push(end);
        }
        let (a, b) = (ends[0].clone(), ends[1].clone());
        if a == b {
            return Err(self.invalid(l.a.span(), "a link from a port to itself".into()));
        }
        self.t.peer.entry(a.clone()).or_insert_with(|| b.clone());
        self.t.peer.entry(b.clone()).or_insert_with(|| a.clone());
        self.t.adjacent.entry(a.node()).or_default().push((b.node(), a.clone()));
        self.t.adjacent.entry(b.node()).or_default().push((a.node(), b.clone()));
        Ok(())
    }

    fn vantage(&mut self, v: &RawVantage) -> Result<(), TopologyError> {
        let text = v.link.get_ref();
        let end = match text.split_once(':') {
            Some((dev, port)) => match self.names.get(dev) {
                Some(Node::Device(d)) => End::Port(*d, port.into()),
                _ => return Err(self.invalid(v.link.span(), format!("unknown device {dev:?} in {text:?}"))),
            },
            None => match self.names.get(text.as_str()) {
                Some(Node::Host(h)) => End::Host(*h),
                _ => return Err(self.invalid(v.link.span(), format!("{text:?} is not a host or device:port"))),
            },
        };
        if !self.t.peer.contains_key(&end) {
            return Err(self.invalid(v.link.span(), format!("{text} is not an end of any [[link]]")));
        }
        if v.label.is_none() && v.origin.is_none() {
            return Err(self.invalid(v.link.span(), "a [[vantage]] needs a label, an origin or both".into()));
        }
        self.t.vantage.push(VantageTie {
            label: v.label.as_ref().map(|l| l.get_ref().clone()),
            origin: v.origin.as_ref().map(|o| o.get_ref().clone()),
            link: end,
        });
        Ok(())
    }
}

/// Whether `path` crosses a paused link (`from` paused `to`): it goes from `to` into `from`.
pub fn crosses(path: &[Node], (from, to): (Node, Node)) -> bool {
    path.windows(2).any(|w| w[0] == to && w[1] == from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[device]]
name = "leaf1"
ports = { p1 = "02:00:00:00:07:d1", p5 = "02:00:00:00:07:d5" }
[[device]]
name = "spine1"
ports = { p1 = "02:00:00:00:08:01" }
[[host]]
name = "h1"
mac = "02:00:00:00:03:e9"
ip = "10.2.0.1"
[[link]]
a = "leaf1:p1"
b = "h1"
[[link]]
a = "leaf1:p5"
b = "spine1:p1"
"#;

    #[test]
    fn resolves_owners_peers_and_paths() {
        let t = Topology::parse(GOOD).unwrap();
        let port = t.owner(&parse_mac("02:00:00:00:07:d5").unwrap()).unwrap().clone();
        assert_eq!(port, End::Port(0, "p5".into()));
        assert_eq!(t.peer(&port), Some(&End::Port(1, "p1".into())));
        assert_eq!(t.host_of_ip("10.2.0.1".parse().unwrap()), Some(0));
        assert_eq!(t.path(Node::Device(1), Node::Host(0)), Some(vec![Node::Device(1), Node::Device(0), Node::Host(0)]));
        assert_eq!(t.port_toward(0, Node::Host(0)), Some("p1".into()));
        assert_eq!(t.port_toward(1, Node::Host(0)), Some("p1".into()));
    }

    fn error(text: &str) -> String {
        Topology::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn refuses_with_the_line() {
        let dup_mac = GOOD.replace("02:00:00:00:08:01", "02:00:00:00:07:d1");
        assert!(error(&dup_mac).contains("line 7: MAC 02:00:00:00:07:d1 appears twice"), "{}", error(&dup_mac));
        let twice = format!("{GOOD}[[link]]\na = \"leaf1:p1\"\nb = \"spine1:p1\"\n");
        assert!(error(&twice).contains("line 19: port leaf1:p1 is linked twice"), "{}", error(&twice));
        let unknown = GOOD.replace("b = \"h1\"", "b = \"h9\"");
        assert!(error(&unknown).contains("line 14: unknown host \"h9\""), "{}", error(&unknown));
        let no_port = GOOD.replace("a = \"leaf1:p5\"", "a = \"leaf1:p7\"");
        assert!(error(&no_port).contains("line 16: device leaf1 has no port \"p7\""), "{}", error(&no_port));
        let bad_mac = GOOD.replace("02:00:00:00:03:e9", "02:00:00:00:03");
        assert!(error(&bad_mac).contains("line 10: host h1"), "{}", error(&bad_mac));
        assert!(error("[[device]]\nname = 3\n").contains("line 2"), "{}", error("[[device]]\nname = 3\n"));
        let unlinked = format!("{GOOD}[[vantage]]\nlabel = \"up\"\nlink = \"leaf1:p9\"\n");
        assert!(error(&unlinked).contains("line 20: leaf1:p9 is not an end of any [[link]]"), "{}", error(&unlinked));
        let bare = format!("{GOOD}[[vantage]]\nlink = \"leaf1:p5\"\n");
        assert!(error(&bare).contains("needs a label, an origin or both"), "{}", error(&bare));
    }

    #[test]
    fn vantage_ties_by_label_and_origin() {
        let text = format!(
            "{GOOD}[[vantage]]\nlabel = \"up\"\nlink = \"leaf1:p5\"\n[[vantage]]\norigin = \"192.0.2.1\"\nlink = \"h1\"\n"
        );
        let t = Topology::parse(&text).unwrap();
        let seen = |l: &str, o: Option<&str>| t.links_seen(&[(l.to_string(), o.map(str::to_string))]);
        assert_eq!(seen("up", None), vec![End::Port(0, "p5".into())]);
        assert_eq!(seen("col", Some("192.0.2.1/session 5")), vec![End::Host(0)]);
        assert_eq!(seen("col", Some("192.0.2.10")), vec![], "an address is matched whole");
        assert_eq!(seen("other", None), vec![]);
        // Through the tied link spine1 — leaf1 on the way from h1 back to h1's leaf is a detour.
        let via = t.path_via(Node::Host(0), Node::Device(0), &[End::Port(1, "p1".into())]);
        assert_eq!(via, Some(vec![Node::Host(0), Node::Device(0), Node::Device(1), Node::Device(0)]));
    }
}

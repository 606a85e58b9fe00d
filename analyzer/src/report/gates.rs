//! CI gates: `--fail-on PATH OP NUMBER` over the JSON report. A gate trips when its expression
//! is true. A path names object keys (and array indices) with dots; a path that ends at a list
//! compares the list's length; a list of findings followed by a severity (`audit.error`) counts
//! the findings of that severity. A path that does not exist is a usage error, never a silent
//! pass.

use serde_json::Value;

/// Severities of audit findings, usable as the last step of a path over a list of findings.
const SEVERITIES: [&str; 3] = ["error", "warning", "info"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub path: Vec<String>,
    pub op: Op,
    pub number: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    #[error("--fail-on {gate}: the report has no `{missing}` (at `{at}`)")]
    UnknownPath { gate: String, missing: String, at: String },
    #[error("--fail-on {gate}: `{path}` is {what}, not a number or a list")]
    NotANumber { gate: String, path: String, what: &'static str },
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.path.join("."), self.op.symbol(), self.number)
    }
}

impl Gate {
    /// Parses `PATH OP NUMBER`, e.g. `capture.classes.cnp>0`, `rtt_ns.p999 > 50000`.
    pub fn parse(s: &str) -> Result<Gate, String> {
        const OPS: [(&str, Op); 6] =
            [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), ("!=", Op::Ne), (">", Op::Gt), ("<", Op::Lt)];
        let (at, sym, op) = OPS
            .iter()
            .filter_map(|(sym, op)| s.find(sym).map(|at| (at, *sym, *op)))
            .min_by_key(|(at, sym, _)| (*at, std::cmp::Reverse(sym.len())))
            .ok_or_else(|| format!("{s:?}: expected PATH OP NUMBER with OP one of > >= < <= == !="))?;
        let path = s[..at].trim();
        let number = s[at + sym.len()..].trim();
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(format!("{s:?}: empty path or path segment"));
        }
        let number: f64 = number.parse().map_err(|_| format!("{s:?}: {number:?} is not a number"))?;
        Ok(Gate { path: path.split('.').map(str::to_string).collect(), op, number })
    }

    /// The value the gate compares: a number, or a list's length.
    pub fn value(&self, report: &Value) -> Result<f64, GateError> {
        let mut v = report;
        for (i, seg) in self.path.iter().enumerate() {
            // `audit.error`: the findings of that severity (a list of findings, then a severity).
            if let Value::Array(a) = v
                && i + 1 == self.path.len()
                && SEVERITIES.contains(&seg.as_str())
                && a.iter().all(|x| x.get("severity").is_some())
            {
                return Ok(a.iter().filter(|x| x["severity"] == seg.as_str()).count() as f64);
            }
            let next = match v {
                Value::Object(o) => o.get(seg),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|n| a.get(n)),
                _ => None,
            };
            v = next.ok_or_else(|| GateError::UnknownPath {
                gate: self.to_string(),
                missing: seg.clone(),
                at: if i == 0 { "the top".into() } else { self.path[..i].join(".") },
            })?;
        }
        match v {
            Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
            Value::Array(a) => Ok(a.len() as f64),
            Value::Bool(b) => Ok(*b as u8 as f64),
            other => Err(GateError::NotANumber {
                gate: self.to_string(),
                path: self.path.join("."),
                what: match other {
                    Value::Object(_) => "an object",
                    Value::String(_) => "a string",
                    _ => "null",
                },
            }),
        }
    }

    /// Whether a report of the schema can have this path at all (checked before any work, so
    /// that a misspelt gate fails at once, not after an hour's capture): `Err` names the
    /// segment no report has.
    pub fn possible(&self) -> Result<(), String> {
        let schema: Value = serde_json::from_str(super::validate::SCHEMA_JSON).map_err(|e| e.to_string())?;
        let mut at = vec![&schema];
        for (i, seg) in self.path.iter().enumerate() {
            let last = i + 1 == self.path.len();
            let mut next = Vec::new();
            for node in at.iter().flat_map(|n| alternatives(&schema, n)) {
                if last && SEVERITIES.contains(&seg.as_str()) && node.get("items").is_some() {
                    return Ok(());
                }
                if let Some(p) = node.get("properties").and_then(|p| p.get(seg)) {
                    next.push(p);
                } else if let Some(a) = node.get("additionalProperties").filter(|a| a.is_object()) {
                    next.push(a);
                }
                if let (Some(items), Ok(_)) = (node.get("items"), seg.parse::<usize>()) {
                    next.push(items);
                }
            }
            if next.is_empty() {
                let place = if i == 0 { "the top".to_string() } else { self.path[..i].join(".") };
                return Err(format!("--fail-on {self}: no `{seg}` in any report (at {place}); see the report schema"));
            }
            at = next;
        }
        Ok(())
    }

    /// `Some(value)` when the gate trips.
    pub fn check(&self, report: &Value) -> Result<Option<f64>, GateError> {
        let v = self.value(report)?;
        Ok(self.op.holds(v, self.number).then_some(v))
    }
}

/// A schema node and the nodes it stands for (`$ref`, `oneOf`, `anyOf`, `allOf`), resolved.
fn alternatives<'a>(root: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    let mut out = vec![node];
    let mut i = 0;
    while i < out.len() && out.len() < 64 {
        let n = out[i];
        if let Some(r) = n.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/"))
            && let Some(t) = r.split('/').try_fold(root, |v, k| v.get(k))
        {
            out.push(t);
        }
        for key in ["oneOf", "anyOf", "allOf"] {
            out.extend(n.get(key).and_then(Value::as_array).into_iter().flatten());
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let g = Gate::parse("capture.classes.cnp>0").unwrap();
        assert_eq!((g.path.join("."), g.op, g.number), ("capture.classes.cnp".into(), Op::Gt, 0.0));
        assert_eq!(Gate::parse("ecmp.observed.imbalance >= 1.5").unwrap().op, Op::Ge);
        assert_eq!(Gate::parse("a<=2").unwrap().op, Op::Le);
        assert_eq!(Gate::parse("a!=2").unwrap().op, Op::Ne);
        assert_eq!(Gate::parse("a==-1").unwrap().number, -1.0);
        assert!(Gate::parse("a>b").is_err());
        assert!(Gate::parse("a..b>1").is_err());
        assert!(Gate::parse(">1").is_err());
        assert!(Gate::parse("a 1").is_err());
    }

    #[test]
    fn paths_no_report_has_are_found_before_any_work() {
        for ok in [
            "capture.classes.cnp>0",
            "flows>=2",
            "flows.0.bytes>1",
            "audit.error>0",
            "rtt_ns.p999>50000",
            "pfc.senders.0.paused_ns>0",
            "export.clickhouse.dropped>0",
            "trajectory.hops.0.loss.value>0.001",
        ] {
            assert_eq!(Gate::parse(ok).unwrap().possible(), Ok(()), "{ok}");
        }
        let e = Gate::parse("capture.clases.cnp>0").unwrap().possible().unwrap_err();
        assert!(e.contains("`clases`") && e.contains("at capture"), "{e}");
        assert!(Gate::parse("nosuch>0").unwrap().possible().is_err());
        assert!(Gate::parse("flows.x.bytes>0").unwrap().possible().is_err(), "a list takes an index");
    }

    #[test]
    fn check() {
        let r: Value = serde_json::json!({"capture": {"classes": {"cnp": 6}, "partial": false},
                                          "flows": [{"bytes": 10}, {"bytes": 20}], "kind": "offline"});
        assert_eq!(Gate::parse("capture.classes.cnp>0").unwrap().check(&r), Ok(Some(6.0)));
        assert_eq!(Gate::parse("capture.classes.cnp>6").unwrap().check(&r), Ok(None));
        assert_eq!(Gate::parse("flows>=2").unwrap().check(&r), Ok(Some(2.0)), "a list compares by its length");
        assert_eq!(Gate::parse("flows.1.bytes==20").unwrap().check(&r), Ok(Some(20.0)));
        assert_eq!(Gate::parse("capture.partial==0").unwrap().check(&r), Ok(Some(0.0)));
        assert!(matches!(
            Gate::parse("capture.classes.nosuch>0").unwrap().check(&r),
            Err(GateError::UnknownPath { missing, at, .. }) if missing == "nosuch" && at == "capture.classes"
        ));
        assert!(matches!(Gate::parse("flows.7.bytes>0").unwrap().check(&r), Err(GateError::UnknownPath { .. })));
        assert!(matches!(Gate::parse("capture.classes>0").unwrap().check(&r), Err(GateError::NotANumber { .. })));
        assert!(matches!(Gate::parse("kind>0").unwrap().check(&r), Err(GateError::NotANumber { .. })));
        let r = serde_json::json!({"audit": [{"severity": "error"}, {"severity": "info"}, {"severity": "error"}]});
        assert_eq!(Gate::parse("audit.error>0").unwrap().check(&r), Ok(Some(2.0)));
        assert_eq!(Gate::parse("audit.warning>0").unwrap().check(&r), Ok(None));
        assert!(Gate::parse("audit.fatal>0").unwrap().check(&r).is_err());
        let r = serde_json::json!({"audit": []});
        assert_eq!(Gate::parse("audit.error>0").unwrap().check(&r), Ok(None), "no findings: zero errors");
    }
}

//! Serde helpers shared by the sections: which fields are left out when at their default.

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn yes() -> bool {
    true
}

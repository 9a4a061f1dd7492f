//! Natural ordering of names, so that `ingester-zone-a-2` sorts before `ingester-zone-a-10`.

use std::cmp::Ordering;

/// Compares two strings, treating runs of ASCII digits as numbers.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (na, ra) = split_digits(a);
                let (nb, rb) = split_digits(b);
                // Compare numerically without parsing (numbers may exceed u64): strip leading zeros, then length.
                let ta = trim_zeros(na);
                let tb = trim_zeros(nb);
                let ord = ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb)).then_with(|| na.len().cmp(&nb.len()));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = ra;
                b = rb;
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn split_digits(s: &[u8]) -> (&[u8], &[u8]) {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    s.split_at(n)
}

fn trim_zeros(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|c| **c == b'0').count();
    &s[n..]
}

/// The ordinal of a StatefulSet pod (`<sts>-<ordinal>`), if the name has that shape.
pub fn pod_ordinal(sts_name: &str, pod_name: &str) -> Option<u32> {
    pod_name.strip_prefix(sts_name)?.strip_prefix('-')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_by_value() {
        assert_eq!(natural_cmp("x-2", "x-10"), Ordering::Less);
        assert_eq!(natural_cmp("x-10", "x-2"), Ordering::Greater);
        assert_eq!(natural_cmp("x-10", "x-10"), Ordering::Equal);
        assert_eq!(natural_cmp("a-1", "b-0"), Ordering::Less);
        assert_eq!(natural_cmp("x-01", "x-1"), Ordering::Greater);
        assert_eq!(natural_cmp("x", "x-1"), Ordering::Less);
        assert_eq!(natural_cmp("x-99999999999999999999999", "x-100000000000000000000000"), Ordering::Less);
    }

    #[test]
    fn ordinals() {
        assert_eq!(pod_ordinal("ingester-zone-a", "ingester-zone-a-12"), Some(12));
        assert_eq!(pod_ordinal("ingester-zone-a", "ingester-zone-ab-1"), None);
        assert_eq!(pod_ordinal("ingester-zone-a", "ingester-zone-a"), None);
    }
}

//! How far a sum of generated numbers can reach, so one that could
//! overflow (or leave the finite floats) is refused when the scenario is
//! read, not wrapped when a call is written.

use std::sync::atomic::Ordering;

use super::{Expr, Op};

/// The least and greatest values a numeric expression can take, as far as
/// the parser can know (a polled value is any quantity; a counter is taken
/// to stay within 2^48 of its start, more requests than any run makes).
fn bounds(expr: &Expr) -> (f64, f64) {
    const SEQ_SPAN: f64 = (1u64 << 48) as f64;
    match expr {
        Expr::Int(low, high) => (*low as f64, *high as f64),
        Expr::Float(low, high) => (*low, *high),
        Expr::Quantity(low, high) => (*low as f64, *high as f64),
        Expr::Seq(start) => {
            let start = start.load(Ordering::Relaxed) as f64;
            (start, start + SEQ_SPAN)
        }
        Expr::Now => (0.0, 1e11),
        Expr::NowMs => (0.0, 1e14),
        Expr::Poll(..) => (0.0, u64::MAX as f64),
        Expr::Literal(json) => json.parse::<f64>().map_or((0.0, 0.0), |v| (v, v)),
        Expr::Add(a, b) => {
            let ((al, ah), (bl, bh)) = (bounds(a), bounds(b));
            (al + bl, ah + bh)
        }
        Expr::Sub(a, b) => {
            let ((al, ah), (bl, bh)) = (bounds(a), bounds(b));
            (al - bh, ah - bl)
        }
        _ => (0.0, 0.0),
    }
}

/// Whether an expression's values are quantities or floats, as
/// `arithmetic` decides at run time.
fn kind(expr: &Expr) -> Kind {
    match expr {
        Expr::Quantity(..) | Expr::Poll(..) => Kind::Quantity,
        Expr::Float(..) => Kind::Float,
        Expr::Literal(json) if json.contains(['.', 'e', 'E']) => Kind::Float,
        Expr::Add(a, b) | Expr::Sub(a, b) => match (kind(a), kind(b)) {
            (Kind::Quantity, _) | (_, Kind::Quantity) => Kind::Quantity,
            (Kind::Float, _) | (_, Kind::Float) => Kind::Float,
            _ => Kind::Int,
        },
        _ => Kind::Int,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Float,
    Quantity,
}

/// The least and greatest values of a whole-number expression, exactly.
fn whole_bounds(expr: &Expr) -> (i128, i128) {
    const SEQ_SPAN: i128 = 1 << 48;
    match expr {
        Expr::Int(low, high) => ((*low).into(), (*high).into()),
        Expr::Quantity(low, high) => ((*low).into(), (*high).into()),
        Expr::Seq(start) => {
            let start = i128::from(start.load(Ordering::Relaxed));
            (start, start + SEQ_SPAN)
        }
        Expr::Poll(..) => (0, u64::MAX.into()),
        Expr::Literal(json) => json.parse::<i64>().map_or((0, 0), |v| (v.into(), v.into())),
        Expr::Add(a, b) => {
            let ((al, ah), (bl, bh)) = (whole_bounds(a), whole_bounds(b));
            (al + bl, ah + bh)
        }
        Expr::Sub(a, b) => {
            let ((al, ah), (bl, bh)) = (whole_bounds(a), whole_bounds(b));
            (al - bh, ah - bl)
        }
        _ => {
            let (low, high) = bounds(expr);
            (low as i128, high as i128)
        }
    }
}

/// Refuses a sum whose value could be wrong: a float past the largest
/// finite number, or a whole number past 64 bits. (A quantity below zero
/// is clamped to 0 by design; past 2^64 - 1 it is clamped there.)
pub(super) fn check_sum(expr: &Expr, op: Op) -> Result<(), String> {
    let fits = match kind(expr) {
        Kind::Float => {
            let (low, high) = bounds(expr);
            low.is_finite() && high.is_finite()
        }
        Kind::Int => {
            let (low, high) = whole_bounds(expr);
            low >= i64::MIN.into() && high <= i64::MAX.into()
        }
        Kind::Quantity => true,
    };
    if fits {
        return Ok(());
    }
    let range = match kind(expr) {
        Kind::Float => {
            let (low, high) = bounds(expr);
            format!("{low:e}..{high:e}, past what a finite float holds")
        }
        _ => {
            let (low, high) = whole_bounds(expr);
            format!("{low}..{high}, past what a 64-bit whole number holds")
        }
    };
    Err(format!("`{}` can give {range}: narrow its ranges", op.text()))
}

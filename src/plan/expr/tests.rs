//! The generators' edges: ranges wider than the largest float, whole
//! numbers at the 64-bit edges, sums that could pass either.

use std::path::Path;

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::*;

fn compile(text: &str) -> Result<Expr, String> {
    let polled = Arc::new(Polled::new(vec!["head".to_string()]));
    parse(
        text,
        &Scope {
            base_dir: Path::new("."),
            polled: &polled,
            vars: &[],
        },
    )
}

/// Every value an expression gives is one JSON can carry and lies in
/// the range it was asked for.
fn assert_sound(text: &str, seed: u64) {
    let Ok(expr) = compile(text) else { return };
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..64 {
        if let Generated::Float(f) = expr.eval(&mut rng, &Vars::NONE) {
            assert!(f.is_finite(), "{text} gave {f}");
        }
    }
}

#[test]
fn a_float_range_wider_than_the_largest_float_draws_inside_it() {
    let expr = compile("float(-1e308, 1e308)").expect("finite bounds are a range");
    let mut rng = SmallRng::seed_from_u64(1);
    let draws: Vec<f64> = (0..1000)
        .map(|_| match expr.eval(&mut rng, &Vars::NONE) {
            Generated::Float(f) => f,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(draws
        .iter()
        .all(|f| f.is_finite() && (-1e308..=1e308).contains(f)));
    assert!(draws.iter().any(|f| *f < -1e307) && draws.iter().any(|f| *f > 1e307));
}

#[test]
fn bounds_that_are_not_finite_are_refused() {
    for text in ["float(-1e309, 0)", "float(0, 1e400)"] {
        let error = compile(text).expect_err(text);
        assert!(error.contains("finite bounds"), "{text}: {error}");
    }
}

#[test]
fn whole_numbers_at_the_64_bit_edges_are_drawn_and_added_exactly() {
    let full = compile("int(-9223372036854775808, 9223372036854775807)").unwrap();
    let mut rng = SmallRng::seed_from_u64(2);
    for _ in 0..100 {
        assert!(matches!(full.eval(&mut rng, &Vars::NONE), Generated::Int(_)));
    }
    // f64 arithmetic would give 9007199254740992 for both.
    let exact = compile("int(9007199254740993, 9007199254740993) + 0").unwrap();
    assert_eq!(
        exact.eval(&mut rng, &Vars::NONE),
        Generated::Int(9007199254740993)
    );
    let sum = compile("int(4611686018427387904, 4611686018427387904) - 1").unwrap();
    assert_eq!(
        sum.eval(&mut rng, &Vars::NONE),
        Generated::Int(4611686018427387903)
    );
}

#[test]
fn sums_that_can_pass_64_bits_or_the_largest_float_are_refused() {
    for text in [
        "int(0, 9223372036854775807) + 1",
        "int(-9223372036854775808, 0) - 1",
        "seq(9223372036854775000) + 1",
        "float(0, 1.7e308) + float(0, 1.7e308)",
        "float(-1.7e308, 0) - 1.7e308",
    ] {
        let error = compile(text).expect_err(text);
        assert!(error.contains("narrow its ranges"), "{text}: {error}");
    }
    for text in [
        "seq() + 1",
        "int(0, 100) - 50",
        "head - int(0, 100)",
        "head + 1",
        "float(0, 1) + 1",
    ] {
        compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}

#[test]
fn a_quantity_below_zero_is_block_zero() {
    let expr = compile("quantity(5, 5) - 100").unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    assert_eq!(expr.eval(&mut rng, &Vars::NONE), Generated::Quantity(0));
}

fn extreme() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1.7976931348623157e308".to_string()),
        Just("-1.7976931348623157e308".to_string()),
        Just("1e309".to_string()),
        Just("-1e309".to_string()),
        Just("9223372036854775807".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("9223372036854775808".to_string()),
        Just("0".to_string()),
        Just("5e-324".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
    ]
}

proptest! {
    #[test]
    fn no_generator_panics_or_gives_a_float_json_cannot_hold(
        a in extreme(),
        b in extreme(),
        c in extreme(),
        which in 0..8usize,
        seed in any::<u64>(),
    ) {
        let text = match which {
            0 => format!("float({a}, {b})"),
            1 => format!("int({a}, {b})"),
            2 => format!("quantity({a}, {b})"),
            3 => format!("hex({a})"),
            4 => format!("float({a}, {b}) + {c}"),
            5 => format!("int({a}, {b}) - {c}"),
            6 => format!("head - {a} + {c}"),
            _ => format!("seq({a}) + int({b}, {c})"),
        };
        assert_sound(&text, seed);
    }
}

#[test]
fn a_quantity_takes_the_whole_64_bit_unsigned_range_and_says_what_is_past_it() {
    let expr = compile("quantity(0, 18446744073709551615)").expect("the largest quantity is a bound");
    let mut rng = SmallRng::seed_from_u64(4);
    assert!(matches!(expr.eval(&mut rng, &Vars::NONE), Generated::Quantity(_)));
    let past = compile("quantity(0, 18446744073709551616)").unwrap_err();
    assert!(past.contains("past the largest quantity"), "{past}");
    assert!(compile("quantity(-1, 5)").unwrap_err().contains("not negative"));
    let sum = compile("int(9223372036854775807, 9223372036854775807) + 1").unwrap_err();
    assert!(sum.contains("9223372036854775808..9223372036854775808"), "{sum}");
}

//! The few statistics the dimensions share: means, the sample coefficient of
//! variation, and the guard every reported value passes through.

/// A reported score: `None` unless finite, then clamped to 0..=1.
pub(super) fn unit(x: f64) -> Option<f64> {
    x.is_finite().then(|| x.clamp(0.0, 1.0))
}

/// Arithmetic mean; `None` for no values.
pub(super) fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Mean of the values that are defined; `None` when none is.
pub(super) fn mean_of_defined(values: &[Option<f64>]) -> Option<f64> {
    let defined: Vec<f64> = values.iter().flatten().copied().collect();
    mean(&defined)
}

/// Sample (K−1) variance; `None` below two values.
pub(super) fn sample_variance(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values)?;
    let squares: f64 = values.iter().map(|v| (v - m) * (v - m)).sum();
    Some(squares / (values.len() - 1) as f64)
}

/// Sample coefficient of variation, `s / mean`; `None` below two values or when the
/// mean is not positive (a CV against a zero mean says nothing).
pub(super) fn sample_cv(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    if m <= 0.0 {
        return None;
    }
    let cv = sample_variance(values)?.sqrt() / m;
    cv.is_finite().then_some(cv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_clamps_and_refuses_non_finite_values() {
        assert_eq!(unit(1.0 + 1e-12), Some(1.0));
        assert_eq!(unit(-1e-12), Some(0.0));
        assert_eq!(unit(f64::NAN), None);
        assert_eq!(unit(f64::INFINITY), None);
    }

    #[test]
    fn sample_cv_uses_the_k_minus_one_variance() {
        // [1, 3]: mean 2, s² = (1 + 1)/1 = 2, cv = √2/2
        let cv = sample_cv(&[1.0, 3.0]).unwrap();
        assert!((cv - 2f64.sqrt() / 2.0).abs() < 1e-15);
    }

    #[test]
    fn sample_cv_is_undefined_for_one_value_or_a_zero_mean() {
        assert_eq!(sample_cv(&[4.0]), None);
        assert_eq!(sample_cv(&[0.0, 0.0]), None);
    }

    #[test]
    fn mean_of_defined_skips_missing_parts() {
        // (0.2 + 0.6) / 2 = 0.4
        assert_eq!(mean_of_defined(&[Some(0.2), None, Some(0.6)]), Some(0.4));
        assert_eq!(mean_of_defined(&[None, None]), None);
    }
}

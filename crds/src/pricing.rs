//! What tokens cost: the one place that turns usage and a model's `pricing` into money.
//!
//! Prices are decimal strings per million tokens (`"2.50"`, at most nine integer digits and six
//! decimals, as the CRD's pattern allows); amounts are integer millionths of the currency's
//! unit ("micros"). Cost is computed exactly in 128-bit integers and rounded once, half up, to
//! a micro: `(uncached input × input price + cached input × cached price + output × output
//! price) / 10⁶`, where the prices are in micros per million tokens. Cached input tokens are a
//! part of the input tokens, priced at `cachedInputPerMillion` (at `inputPerMillion` when that
//! is absent). The result saturates at `u64::MAX` micros rather than overflow.

use crate::agent::ModelPricing;
use crate::micros::parse_micros;
use crate::report::{Cost, UsageTotals};

/// Tokens a price is quoted for.
const TOKENS_PER_PRICE: u128 = 1_000_000;

/// Whether `pricing` holds only prices and a currency code its schema allows (the run API and
/// `herd-runner run` check it; the API server's pattern already did for Agents).
pub fn is_valid(pricing: &ModelPricing) -> bool {
    let code =
        pricing.currency.len() == 3 && pricing.currency.bytes().all(|b| b.is_ascii_uppercase());
    code && parse_micros(&pricing.input_per_million).is_some()
        && parse_micros(&pricing.output_per_million).is_some()
        && pricing
            .cached_input_per_million
            .as_deref()
            .is_none_or(|price| parse_micros(price).is_some())
}

/// What `usage` costs at `pricing`, rounded half up to a micro. A price that does not parse
/// (the schema forbids it) counts as zero.
pub fn cost(usage: &UsageTotals, pricing: &ModelPricing) -> Cost {
    let price = |text: &str| u128::from(parse_micros(text).unwrap_or(0));
    let input = price(&pricing.input_per_million);
    let output = price(&pricing.output_per_million);
    let cached = pricing
        .cached_input_per_million
        .as_deref()
        .map_or(input, price);
    let cached_tokens = usage.cached_input_tokens.min(usage.input_tokens);
    let uncached_tokens = usage.input_tokens - cached_tokens;
    // Tokens are below 2^64 and parsed prices below 10^15 < 2^50: each product is below 2^114
    // and the sum of three below 2^116, so none of this overflows.
    let scaled = u128::from(uncached_tokens) * input
        + u128::from(cached_tokens) * cached
        + u128::from(usage.output_tokens) * output;
    let micros = (scaled + TOKENS_PER_PRICE / 2) / TOKENS_PER_PRICE;
    Cost {
        currency: pricing.currency.clone(),
        micros: u64::try_from(micros).unwrap_or(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::micros::format_micros;

    fn pricing(input: &str, output: &str, cached: Option<&str>) -> ModelPricing {
        ModelPricing {
            input_per_million: input.into(),
            output_per_million: output.into(),
            cached_input_per_million: cached.map(str::to_owned),
            currency: "USD".into(),
        }
    }

    fn usage(input: u64, cached: u64, output: u64) -> UsageTotals {
        UsageTotals {
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            ..UsageTotals::default()
        }
    }

    #[test]
    fn cached_tokens_are_part_of_the_input_at_their_own_price() {
        // 1M input of which 400k cached, 100k output at $2 / $0.50 cached / $8.
        let cost = cost(
            &usage(1_000_000, 400_000, 100_000),
            &pricing("2", "8", Some("0.50")),
        );
        assert_eq!(cost.currency, "USD");
        // 600k × 2 + 400k × 0.5 + 100k × 8 = 1.2 + 0.2 + 0.8 = 2.2
        assert_eq!(cost.micros, 2_200_000);
        assert_eq!(cost.amount(), "2.200000");
    }

    #[test]
    fn without_a_cached_price_cached_tokens_cost_the_input_price() {
        let priced = cost(&usage(1000, 1000, 0), &pricing("3", "15", None));
        assert_eq!(priced.micros, 3000);
    }

    #[test]
    fn the_amount_rounds_half_up_to_a_micro_once() {
        // 10 tokens at $0.15/M = 1.5 micros → 2; 3 tokens → 0.45 → 0.
        assert_eq!(
            cost(&usage(10, 0, 0), &pricing("0.15", "0", None)).micros,
            2
        );
        assert_eq!(cost(&usage(3, 0, 0), &pricing("0.15", "0", None)).micros, 0);
    }

    #[test]
    fn more_cached_than_input_tokens_counts_all_input_as_cached() {
        let priced = cost(&usage(100, 500, 0), &pricing("10", "0", Some("1")));
        assert_eq!(priced.micros, 100);
    }

    #[test]
    fn validity_follows_the_schema() {
        assert!(is_valid(&pricing("2.5", "10", Some("1.25"))));
        assert!(!is_valid(&pricing("2,5", "10", None)));
        assert!(!is_valid(&pricing("2", "10", Some("-1"))));
        assert!(!is_valid(&ModelPricing {
            currency: "usd".into(),
            ..pricing("1", "1", None)
        }));
    }

    fn price() -> impl Strategy<Value = String> {
        (0u64..1_000_000_000, 0u64..1_000_000).prop_map(|(w, f)| format!("{w}.{f:06}"))
    }

    proptest! {
        #[test]
        fn any_usage_at_any_price_costs_without_panic_and_grows_with_tokens(
            input in any::<u64>(), cached in any::<u64>(), output in any::<u64>(),
            input_price in price(), output_price in price(), cached_price in price(),
            more in 0u64..1_000_000,
        ) {
            let pricing = pricing(&input_price, &output_price, Some(&cached_price));
            let base = cost(&usage(input, cached, output), &pricing);
            let grown = cost(&usage(input, cached, output.saturating_add(more)), &pricing);
            prop_assert!(grown.micros >= base.micros);
        }

        #[test]
        fn cost_is_exact_within_half_a_micro(
            input in 0u64..10_000_000_000, output in 0u64..10_000_000_000,
            input_price in 0u64..1_000_000_000, output_price in 0u64..1_000_000_000,
        ) {
            let pricing = pricing(&format_micros(input_price), &format_micros(output_price), None);
            let exact = u128::from(input) * u128::from(input_price)
                + u128::from(output) * u128::from(output_price);
            let micros = u128::from(cost(&usage(input, 0, output), &pricing).micros);
            // |micros × 10⁶ − exact| ≤ 10⁶ / 2
            prop_assert!((micros * 1_000_000).abs_diff(exact) <= 500_000);
        }
    }
}

//! A model with prices: the same calls, and the Agent's `model.pricing` for the run loop to
//! turn the run's usage into its cost.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::agent::ModelPricing;
use herd_crds::report::Usage;

use super::{ChatModel, DeltaSink, ModelError, ModelRequest};
use crate::thread::AssistantMessage;

/// `inner` with `pricing`.
pub struct PricedModel {
    inner: Arc<dyn ChatModel>,
    pricing: ModelPricing,
}

impl PricedModel {
    /// `inner`, priced at `pricing`.
    pub fn new(inner: Arc<dyn ChatModel>, pricing: ModelPricing) -> Self {
        PricedModel { inner, pricing }
    }
}

#[async_trait]
impl ChatModel for PricedModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn pricing(&self) -> Option<&ModelPricing> {
        Some(&self.pricing)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError> {
        self.inner.complete(request, on_delta).await
    }
}

/// Adds one answered call of `model` to a run's `usage`: its tokens, to the totals and to the
/// model's entry, and the cost of the whole when the model is priced. Every model call of a run
/// (the loop's and the side calls: title, summary, memory) goes through here.
pub fn record_call(usage: &mut Usage, model: &dyn ChatModel, call: &Usage) {
    usage.add_call(model.name(), call);
    if let Some(pricing) = model.pricing() {
        usage.cost = Some(herd_crds::pricing::cost(&usage.totals(), pricing));
    }
}

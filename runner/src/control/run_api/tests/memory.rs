//! Memory over the run API: the document read, operations posted with the attempt.

#![cfg(test)]

use herd_crds::wire::{FactCategory, MemoryOperation};

use super::super::test_server::{Canned, canned};
use super::*;

#[tokio::test]
async fn memory_is_read_and_updated_over_the_run_api() {
    let document = json!({
        "revision": 7,
        "context": {"work": "Builds heat-pump market maps."},
        "facts": [{"id": "f-1", "content": "Prefers tables", "category": "preference",
            "confidence": 0.9, "source": "market-map", "createdAt": "2026-05-01T10:00:00Z",
            "updatedAt": "2026-05-01T10:00:00Z", "confirmationCount": 2}]
    });
    let setup = Setup::new(canned(Canned {
        memory: document,
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);

    let memory = control.read_memory().await.unwrap();
    assert_eq!(memory.revision, 7);
    assert_eq!(memory.facts[0].content, "Prefers tables");
    assert_eq!(
        memory.context.work.as_deref(),
        Some("Builds heat-pump market maps.")
    );

    let operations = vec![
        MemoryOperation::Add {
            content: "Works on the European market".into(),
            category: FactCategory::Context,
            confidence: 0.8,
        },
        MemoryOperation::Reinforce { id: "f-1".into() },
    ];
    control.update_memory(operations).await.unwrap();
    let posted = setup.server.requests_to("/memory");
    assert_eq!(
        posted.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(),
        ["GET", "POST"]
    );
    assert_eq!(
        posted[1].json(),
        json!({"attempt": 1, "operations": [
            {"op": "add", "content": "Works on the European market", "category": "context",
                "confidence": 0.8},
            {"op": "reinforce", "id": "f-1"}
        ]})
    );
}

#[tokio::test]
async fn a_memory_the_run_api_cannot_serve_is_an_error() {
    let setup = Setup::new(Arc::new(|_: &Recorded, _| {
        Reply::error(403, "Forbidden", "another Run's resources")
    }))
    .await;
    let control = setup.control(vec![]);
    let error = control.read_memory().await.unwrap_err();
    assert!(matches!(error, ControlError::Refused(_)), "{error:?}");
    let error = control.update_memory(vec![]).await.unwrap_err();
    assert!(error.to_string().contains("403 Forbidden"), "{error}");
}

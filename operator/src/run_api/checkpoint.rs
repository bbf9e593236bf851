//! The ConfigMap `<run>-checkpoint`, owned by the Run: the thread of the Run's latest question
//! or of its latest attempt stopped by SIGTERM, gzip as the runner sent it, in `binaryData["checkpoint.json.gz"]`, and in the annotation
//! `herd.dev/questions` the ids of every question (and approval request) the Run asked (a JSON list, oldest first), so
//! the Run controller can tell an answer to a question from one that matches none. Replaced at
//! each question under the resourceVersion read; at most [`MAX_CHECKPOINT_BYTES`] of gzip, past
//! which the Run fails `CheckpointTooLarge`. The next attempt resumes from it.
//!
//! Labelled `herd.dev/run`, not `managed-by`: the operator's ConfigMap caches select on that,
//! and checkpoints are large and read once per attempt, live.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, PostParams};

use super::failure::Failure;
use crate::controller::run_objects::owned_by;
use crate::decide::asked_questions::{
    QUESTIONS_ANNOTATION, asked_questions, checkpoint_name, with_question,
};
use crate::decide::run_owned::{Cached, run_owned};

/// Most bytes of gzip a checkpoint may be (~900 KiB: the ConfigMap stays under the API
/// server's 1 MiB).
pub const MAX_CHECKPOINT_BYTES: usize = 900 * 1024;
/// The `binaryData` key of the checkpoint.
pub const CHECKPOINT_KEY: &str = "checkpoint.json.gz";
/// The first bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Writes tried before giving up on a checkpoint that keeps changing.
const TRIES: u32 = 8;

/// The gzip bytes of a `checkpointGzipBase64`, refused unless base64 of a gzip stream.
pub fn decode_checkpoint(base64: &str) -> Result<Vec<u8>, Failure> {
    let bytes = STANDARD
        .decode(base64.trim())
        .map_err(|e| Failure::bad_request(format!("checkpointGzipBase64 is not base64: {e}")))?;
    if !bytes.starts_with(&GZIP_MAGIC) {
        return Err(Failure::bad_request(
            "checkpointGzipBase64 is not gzip (it does not start with 1f 8b)",
        ));
    }
    Ok(bytes)
}

/// Why a checkpoint of `size` bytes does not fit, if it does not.
pub fn too_large(run: &str, size: usize) -> Option<String> {
    (size > MAX_CHECKPOINT_BYTES).then(|| {
        format!(
            "the checkpoint is {size} bytes of gzip, over the limit of {MAX_CHECKPOINT_BYTES} \
             of ConfigMap {}",
            checkpoint_name(run)
        )
    })
}

/// The checkpoint ConfigMap of `run` holding `gzip`, listing `asked`.
pub fn checkpoint_config_map(
    run: &str,
    namespace: &str,
    owner: OwnerReference,
    gzip: Vec<u8>,
    asked: &[String],
) -> ConfigMap {
    // invariant: a list of strings always serializes.
    let listing = serde_json::to_string(asked).unwrap_or_else(|_| "[]".to_owned());
    ConfigMap {
        metadata: ObjectMeta {
            annotations: Some(BTreeMap::from([(QUESTIONS_ANNOTATION.to_owned(), listing)])),
            ..run_owned(checkpoint_name(run), run, namespace, owner, Cached::No)
        },
        binary_data: Some(BTreeMap::from([(
            CHECKPOINT_KEY.to_owned(),
            ByteString(gzip),
        )])),
        ..ConfigMap::default()
    }
}

/// Writes the checkpoint of the question or approval requests `ids` (none: of an interrupted
/// attempt, which asked nothing), listing them among the asked: created, or replaced under the version read when it is this Run's (never one of
/// another Run of the same name); retried on conflicts.
pub async fn write_checkpoint(
    client: &Client,
    namespace: &str,
    run: &str,
    owner: OwnerReference,
    gzip: Vec<u8>,
    ids: &[&str],
) -> Result<(), Failure> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = checkpoint_name(run);
    let writing = format!("writing ConfigMap {name}");
    for _ in 0..TRIES {
        let existing = api
            .get_opt(&name)
            .await
            .map_err(|e| Failure::kube(&writing, &e))?;
        let written = match existing {
            None => {
                let asked = ids
                    .iter()
                    .fold(Vec::new(), |asked, id| with_question(asked, id));
                let desired =
                    checkpoint_config_map(run, namespace, owner.clone(), gzip.clone(), &asked);
                api.create(&PostParams::default(), &desired).await
            }
            Some(existing) => {
                if !owned_by(&existing, &owner.uid) {
                    return Err(Failure::internal(format!(
                        "ConfigMap {name} exists and is not this Run's"
                    )));
                }
                let asked = ids
                    .iter()
                    .fold(asked_questions(&existing.metadata), |asked, id| {
                        with_question(asked, id)
                    });
                let mut desired =
                    checkpoint_config_map(run, namespace, owner.clone(), gzip.clone(), &asked);
                desired.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &desired).await
            }
        };
        match written {
            Ok(_) => return Ok(()),
            // Created or changed since read: read again.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(Failure::kube(&writing, &error)),
        }
    }
    Err(Failure::unavailable(format!(
        "ConfigMap {name} changed {TRIES} times while it was written"
    )))
}

/// The gzip of the Run's checkpoint, when it has one of its own.
pub async fn read_checkpoint(
    client: &Client,
    namespace: &str,
    run: &str,
    uid: &str,
) -> Result<Option<Vec<u8>>, Failure> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let name = checkpoint_name(run);
    let config_map = api
        .get_opt(&name)
        .await
        .map_err(|e| Failure::kube(&format!("reading ConfigMap {name}"), &e))?;
    Ok(config_map
        .filter(|cm| owned_by(cm, uid))
        .and_then(|cm| cm.binary_data)
        .and_then(|mut data| data.remove(CHECKPOINT_KEY))
        .map(|bytes| bytes.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::run_owner;
    use crate::labels;
    use proptest::prelude::*;

    fn owner() -> OwnerReference {
        run_owner("r", "u")
    }

    #[test]
    fn only_base64_of_gzip_is_a_checkpoint() {
        let gzip = vec![0x1f, 0x8b, 8, 0, 1, 2];
        assert_eq!(decode_checkpoint(&STANDARD.encode(&gzip)).unwrap(), gzip);
        let not_base64 = decode_checkpoint("not base64!").unwrap_err();
        assert_eq!(not_base64.status.as_u16(), 400);
        assert!(not_base64.message.contains("not base64"), "{not_base64:?}");
        let not_gzip = decode_checkpoint(&STANDARD.encode(b"{\"messages\": []}")).unwrap_err();
        assert!(not_gzip.message.contains("not gzip"), "{not_gzip:?}");
        assert_eq!(decode_checkpoint("").unwrap_err().status.as_u16(), 400);
    }

    #[test]
    fn past_about_900_kib_of_gzip_it_is_too_large() {
        assert_eq!(too_large("r", MAX_CHECKPOINT_BYTES), None);
        let why = too_large("r", MAX_CHECKPOINT_BYTES + 1).unwrap();
        assert!(
            why.contains("921601 bytes") && why.contains("r-checkpoint"),
            "{why}"
        );
    }

    #[test]
    fn the_layout_is_gzip_in_binary_data_and_the_questions_asked() {
        let cm = checkpoint_config_map(
            "r",
            "ns",
            owner(),
            vec![0x1f, 0x8b],
            &["q-1".into(), "q-2".into()],
        );
        assert_eq!(cm.metadata.name.as_deref(), Some("r-checkpoint"));
        assert_eq!(cm.metadata.owner_references, Some(vec![owner()]));
        assert_eq!(cm.binary_data.unwrap()[CHECKPOINT_KEY].0, vec![0x1f, 0x8b]);
        assert_eq!(cm.data, None);
        assert_eq!(asked_questions(&cm.metadata), vec!["q-1", "q-2"]);
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels[labels::RUN], "r");
        assert!(
            !labels.contains_key(labels::MANAGED_BY),
            "kept out of the caches"
        );
    }

    proptest! {
        #[test]
        fn no_text_makes_decoding_panic(text in "\\PC{0,64}") {
            let _ = decode_checkpoint(&text);
        }
    }
}

//! A tool call's result as the model reads it: text blocks joined, images shown to a vision
//! model once (as `view_image` does) and named otherwise, embedded resources as their text,
//! structured content as JSON when there is no text. Large text goes through the chain's
//! output budget like any tool result.

use base64::Engine as _;
use serde_json::Value;

use crate::thread::{ImagePart, ToolStatus};
use crate::tools::ToolOutput;

/// Most images of one result shown to the model.
pub const MAX_IMAGES: usize = 4;
/// Largest image shown, in bytes (decoded).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// The model's view of `result` (an MCP `CallToolResult`, as JSON), from `tool`; `vision`
/// when the model accepts images.
pub fn to_output(tool: &str, result: &Value, vision: bool) -> ToolOutput {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    let blocks = result["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        match block["type"].as_str().unwrap_or_default() {
            "text" => parts.push(block["text"].as_str().unwrap_or_default().to_owned()),
            "image" => {
                let mime = block["mimeType"].as_str().unwrap_or("image/*");
                let data = block["data"].as_str().unwrap_or_default();
                let size = data.len() / 4 * 3;
                if !vision {
                    parts.push(format!(
                        "[an image ({mime}, about {size} bytes): this model cannot see images]"
                    ));
                } else if images.len() >= MAX_IMAGES || size > MAX_IMAGE_BYTES {
                    parts.push(format!(
                        "[an image ({mime}, about {size} bytes) left out: at most {MAX_IMAGES} \
                         images of at most {MAX_IMAGE_BYTES} bytes are shown]"
                    ));
                } else if base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .is_err()
                {
                    parts.push(format!("[an image ({mime}) that is not valid base64]"));
                } else {
                    parts.push(format!(
                        "[image {} ({mime}), shown below]",
                        images.len() + 1
                    ));
                    images.push(ImagePart {
                        mime_type: mime.to_owned(),
                        data_base64: data.to_owned(),
                    });
                }
            }
            "audio" => parts.push(format!(
                "[audio ({}): not supported]",
                block["mimeType"].as_str().unwrap_or("audio/*")
            )),
            "resource" => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                match resource["text"].as_str() {
                    Some(text) => parts.push(format!("[resource {uri}]\n{text}")),
                    None => parts.push(format!("[binary resource {uri}: not shown]")),
                }
            }
            "resource_link" => parts.push(format!(
                "[resource link: {}]",
                block["uri"].as_str().unwrap_or_default()
            )),
            other => parts.push(format!("[content of type {other}: not supported]")),
        }
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null())
    {
        parts.push(structured.to_string());
    }
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let mut content = parts.join("\n");
    if content.is_empty() {
        content = "(no output)".to_owned();
    }
    if is_error && !content.starts_with("Error") {
        content = format!("Error: {tool} failed: {content}");
    }
    let mut output = ToolOutput::ok(content);
    if is_error {
        output.status = ToolStatus::Error;
    }
    output.effect.images = images;
    output
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_blocks_join_and_errors_are_error_results() {
        let result =
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        let output = to_output("t__x", &result, false);
        assert_eq!(
            (output.content.as_str(), output.status),
            ("a\nb", ToolStatus::Success)
        );
        let failed = json!({"content": [{"type": "text", "text": "bad zone"}], "isError": true});
        let output = to_output("t__x", &failed, false);
        assert_eq!(output.status, ToolStatus::Error);
        assert_eq!(output.content, "Error: t__x failed: bad zone");
        let structured = json!({"content": [], "structuredContent": {"time": "12:00"}});
        assert_eq!(
            to_output("t__x", &structured, false).content,
            "{\"time\":\"12:00\"}"
        );
        assert_eq!(to_output("t__x", &json!({}), false).content, "(no output)");
    }

    #[test]
    fn images_reach_vision_models_once_and_are_named_for_others() {
        let png = json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="});
        let result = json!({"content": [{"type": "text", "text": "chart:"}, png]});
        let seeing = to_output("c__plot", &result, true);
        assert_eq!(seeing.effect.images.len(), 1);
        assert!(
            seeing
                .content
                .ends_with("[image 1 (image/png), shown below]")
        );
        let blind = to_output("c__plot", &result, false);
        assert!(blind.effect.images.is_empty());
        assert!(
            blind.content.contains("this model cannot see images"),
            "{}",
            blind.content
        );
        let many = json!({"content": vec![png.clone(); 6]});
        let capped = to_output("c__plot", &many, true);
        assert_eq!(capped.effect.images.len(), MAX_IMAGES);
        assert_eq!(capped.content.matches("left out").count(), 2);
        let broken = json!({"content": [{"type": "image", "mimeType": "image/png", "data": "@@"}]});
        assert!(to_output("c__plot", &broken, true).effect.images.is_empty());
    }

    #[test]
    fn resources_and_unknown_blocks_are_described() {
        let result = json!({"content": [
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "https://x/y", "name": "y"},
            {"type": "audio", "mimeType": "audio/wav", "data": ""},
            {"type": "hologram"}]});
        let content = to_output("r__get", &result, false).content;
        assert_eq!(
            content,
            "[resource file:///a.txt]\nhello\n[binary resource file:///b.bin: not shown]\n\
             [resource link: https://x/y]\n[audio (audio/wav): not supported]\n\
             [content of type hologram: not supported]"
        );
    }
}

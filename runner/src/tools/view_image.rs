//! `view_image`: shows an image file to a vision model (only offered when it supports vision).

use async_trait::async_trait;
use herd_sandbox::{FileContent, SandboxClient};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolGroup, ToolOutput, TypedTool};
use crate::thread::ImagePart;
use crate::thread::state::ViewedImage;

/// Largest image sent to the model (DeerFlow's limit).
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// Arguments of `view_image`.
#[derive(Deserialize, JsonSchema)]
pub struct ViewImageArgs {
    /// Path of a PNG, JPEG, GIF or WebP file.
    pub image_path: String,
}

/// The `view_image` tool.
pub struct ViewImage;

/// The MIME type of a supported image, by extension.
pub fn image_mime_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    match extension.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

#[async_trait]
impl TypedTool for ViewImage {
    const NAME: &'static str = "view_image";
    const GROUP: Option<ToolGroup> = Some(ToolGroup::FileRead);
    const DESCRIPTION: &'static str =
        "Look at an image file (PNG, JPEG, GIF, WebP) in the sandbox.";
    type Args = ViewImageArgs;

    async fn run(&self, args: ViewImageArgs, ctx: &ToolContext) -> ToolOutput {
        let Some(mime_type) = image_mime_type(&args.image_path) else {
            return ToolOutput::error(format!(
                "Error: '{}' is not a PNG, JPEG, GIF or WebP file.",
                args.image_path
            ));
        };
        match ctx
            .executor
            .read_file(&args.image_path, MAX_IMAGE_BYTES)
            .await
        {
            Ok(FileContent { data_base64, size }) => {
                let mut output = ToolOutput::ok(format!(
                    "Loaded {} ({size} bytes); it follows as an image.",
                    args.image_path
                ));
                output.effect.viewed_image = Some((
                    args.image_path,
                    ViewedImage {
                        mime_type: mime_type.to_owned(),
                        size,
                    },
                    ImagePart {
                        mime_type: mime_type.to_owned(),
                        data_base64,
                    },
                ));
                output
            }
            Err(error) => ToolOutput::error(format!("Error: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_image_extensions() {
        assert_eq!(image_mime_type("/a/b.PNG"), Some("image/png"));
        assert_eq!(image_mime_type("x.jpeg"), Some("image/jpeg"));
        assert_eq!(image_mime_type("x.svg"), None);
        assert_eq!(image_mime_type("noext"), None);
    }
}

//! nginx in a Docker image: choosing and reading an image (through the `docker` CLI, never pulling) and,
//! with the `docker` feature, running it as a container ([`container`]).

#[cfg(feature = "docker")]
pub mod container;

use super::install::{BuildInfo, Stream, build_label, detect_libc, glibc_banner};
use anyhow::{Context, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use std::path::Path;

/// The environment variable that names the container image (e.g. `nginx:1.27` where a registry exists).
pub const IMAGE_ENV: &str = "NGINX_KETAMA_IMAGE";

/// A container image of nginx, described by what its `nginx -V` says and its executable's C library
/// ([`Image::probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `name:tag`.
    pub reference: String,
    /// The nginx version inside (`nginx -V`).
    pub version: NginxVersion,
    /// The C library `/usr/sbin/nginx` is linked with (read from the executable).
    pub libc: Libc,
    /// Where the stream module is inside the image.
    pub stream: Stream,
    /// The C library as the golden vectors name it (`glibc 2.36 (Debian 2.36-9+deb12u14)`).
    pub libc_description: String,
    /// The Debian package version the image says it holds (label `nginx-ketama.debian-version`), if any.
    pub package: Option<String>,
    /// How the image was chosen.
    pub origin: ImageOrigin,
}

/// How an image was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageOrigin {
    /// `nginx-ketama/nginx:<version>[-musl]`, built by `scripts/build-images` for a provisioned version.
    Built,
    /// Named by `--image REF` or `$NGINX_KETAMA_IMAGE`.
    Named,
}
/// The image to use for the build of `version` against `libc`: `$NGINX_KETAMA_IMAGE` if set (`name:tag`;
/// its version and C library are read from the image), else the locally built
/// `nginx-ketama/nginx:<version>` (glibc) or `nginx-ketama/nginx:<version>-musl`, which must hold that
/// build.
///
/// # Errors
///
/// The image is not present locally (nothing is ever pulled), or does not hold the build asked for.
pub fn image_for(version: NginxVersion, libc: Libc) -> Result<Image> {
    if let Ok(spec) = std::env::var(IMAGE_ENV) {
        return Image::probe(&spec, ImageOrigin::Named);
    }
    let reference = format!("nginx-ketama/nginx:{}", build_label(version, libc));
    if labels(&reference).is_none() {
        bail!(
            "docker image {reference} is not present locally; build it with scripts/build-images {}",
            build_label(version, libc)
        );
    }
    let image = Image::probe(&reference, ImageOrigin::Built)?;
    if (image.version, image.libc) != (version, libc) {
        bail!(
            "docker image {reference} holds nginx {} built with {}, not {version} with {libc}; rebuild it with \
             scripts/build-images",
            image.version,
            image.libc
        );
    }
    Ok(image)
}

/// Where the images run nginx from (the harness starts `/usr/sbin/nginx` in them).
pub const IMAGE_NGINX: &str = "/usr/sbin/nginx";

impl Image {
    /// Reads the image `reference` (`verify --image REF`): `nginx -V` run inside it (no network), the C
    /// library from its `/usr/sbin/nginx`, the stream module looked for in the image's files as
    /// [`BuildInfo::locate_stream`] says. Never pulls.
    ///
    /// # Errors
    ///
    /// The image is not present locally ("docker pull REF first"), no Docker engine, or an image without an
    /// nginx release at `/usr/sbin/nginx`.
    pub fn probe(reference: &str, origin: ImageOrigin) -> Result<Image> {
        if !available() {
            bail!("no Docker engine answers (docker version failed): cannot read image {reference}");
        }
        let Some(labels) = labels(reference) else {
            bail!("image {reference} is not present locally (docker pull {reference} first)");
        };
        let text = run(reference, IMAGE_NGINX, &["-V"])?;
        let info = BuildInfo::parse(&text).with_context(|| format!("reading nginx -V in image {reference}"))?;
        let files = Files::of(reference)?;
        let executable =
            files.read(IMAGE_NGINX).with_context(|| format!("reading {IMAGE_NGINX} in image {reference}"))?;
        let Some(libc) = detect_libc(&executable) else {
            bail!("cannot tell which C library {IMAGE_NGINX} in image {reference} is linked with");
        };
        let bin_dir = Path::new(IMAGE_NGINX).parent().unwrap_or(Path::new("/"));
        let stream = info.locate_stream(bin_dir, |p| files.read(&p.display().to_string()).is_ok());
        let libc_description = match libc {
            Libc::Glibc => ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6"]
                .iter()
                .find_map(|so| run(reference, so, &[]).ok().and_then(|t| glibc_banner(&t)))
                .unwrap_or_else(|| "glibc (version unknown)".to_string()),
            Libc::Musl => match labels.libc.trim().strip_prefix("musl ") {
                Some(v) => format!("musl {} (Debian {v}, static)", v.split('-').next().unwrap_or(v)),
                None => "musl (version unknown)".to_string(),
            },
        };
        let package = (!labels.package.is_empty()).then_some(labels.package);
        Ok(Image {
            reference: reference.to_string(),
            version: info.version,
            libc,
            stream,
            libc_description,
            package,
            origin,
        })
    }

    /// The image's name and tag, as testcontainers takes them.
    pub fn name_and_tag(&self) -> (&str, &str) {
        let slash = self.reference.rfind('/').map_or(0, |i| i + 1);
        match self.reference[slash..].rfind(':') {
            Some(i) => (&self.reference[..slash + i], &self.reference[slash + i + 1..]),
            None => (&self.reference, "latest"),
        }
    }
}
fn docker(args: &[&str]) -> Option<std::process::Output> {
    std::process::Command::new("docker").args(args).stdin(std::process::Stdio::null()).output().ok()
}

/// Whether a Docker engine answers.
pub fn available() -> bool {
    docker(&["version", "--format", "{{.Server.Version}}"]).is_some_and(|o| o.status.success())
}

/// The labels `scripts/build-images` sets that the harness reads (empty when absent).
pub(crate) struct Labels {
    pub(crate) libc: String,
    pub(crate) package: String,
}

/// The image's labels, or `None` if the image is not present locally.
pub(crate) fn labels(reference: &str) -> Option<Labels> {
    let format =
        r#"{{index .Config.Labels "nginx-ketama.libc"}}|{{index .Config.Labels "nginx-ketama.debian-version"}}"#;
    let out = docker(&["image", "inspect", "-f", format, reference])?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().replace("<no value>", "");
    let (libc, package) = text.split_once('|').unwrap_or((&text, ""));
    Some(Labels { libc: libc.to_string(), package: package.to_string() })
}

/// Runs `program args` in a throw-away container of the (local) image, without a network, and returns
/// what it printed (stderr, then stdout).
pub(crate) fn run(reference: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut argv = vec!["run", "--rm", "--pull=never", "--network", "none", "--entrypoint", program, reference];
    argv.extend_from_slice(args);
    let out = docker(&argv).context("running the docker CLI")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        bail!("{program} in image {reference} failed ({}): {}", out.status, text.trim());
    }
    Ok(text)
}

/// A created (never started) container of an image, to read its files; removed when dropped.
pub(crate) struct Files {
    id: String,
}

impl Files {
    pub(crate) fn of(reference: &str) -> Result<Files> {
        let out =
            docker(&["create", "--pull=never", "--network", "none", reference]).context("running the docker CLI")?;
        if !out.status.success() {
            bail!("creating a container of {reference}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(Files { id: String::from_utf8_lossy(&out.stdout).trim().to_string() })
    }

    /// The file at `path` (symbolic links followed), as a tar stream: the file's bytes are in it
    /// unchanged, which is all [`detect_libc`] needs.
    pub(crate) fn read(&self, path: &str) -> Result<Vec<u8>> {
        let out = docker(&["cp", "-L", &format!("{}:{path}", self.id), "-"]).context("running the docker CLI")?;
        if !out.status.success() {
            bail!("{path}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(out.stdout)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.id]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_split_into_name_and_tag() {
        let image = |reference: &str| Image {
            reference: reference.to_string(),
            version: NginxVersion::new(1, 26, 3),
            libc: Libc::Glibc,
            stream: Stream::BuiltIn,
            libc_description: String::new(),
            package: None,
            origin: ImageOrigin::Named,
        };
        assert_eq!(image("nginx-ketama/nginx:1.26.3").name_and_tag(), ("nginx-ketama/nginx", "1.26.3"));
        assert_eq!(image("localhost:5000/nginx:1.27").name_and_tag(), ("localhost:5000/nginx", "1.27"));
        assert_eq!(image("localhost:5000/nginx").name_and_tag(), ("localhost:5000/nginx", "latest"));
        assert_eq!(image("nginx").name_and_tag(), ("nginx", "latest"));
    }
}

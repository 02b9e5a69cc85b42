//! nginx builds provisioned by `scripts/provision-nginx` (Debian packages unpacked under `.nginx/<version>/`).

use nginx_ketama::version::NginxVersion;
use std::path::{Path, PathBuf};

/// One provisioned nginx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// Upstream version, e.g. 1.26.3.
    pub version: NginxVersion,
    /// Debian package version, e.g. `1.26.3-3+deb13u11`.
    pub package: String,
    /// The tree (`.nginx/<version>`).
    pub dir: PathBuf,
}

impl Installation {
    /// The wrapper that runs nginx through the tree's own loader and libraries.
    pub fn binary(&self) -> PathBuf {
        self.dir.join("nginx")
    }

    /// The dynamic stream module.
    pub fn stream_module(&self) -> PathBuf {
        self.dir.join("root/usr/lib/nginx/modules/ngx_stream_module.so")
    }

    /// The local Docker image `scripts/build-images` makes from the same files.
    pub fn image(&self) -> (String, String) {
        ("nginx-ketama/nginx".to_string(), self.version.to_string())
    }

    /// Every installation under `root`, oldest first.
    pub fn discover(root: &Path) -> Vec<Installation> {
        let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
        let mut out: Vec<Installation> = entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_type().map(|t| t.is_symlink()).unwrap_or(true))
            .filter_map(|e| {
                let dir = e.path();
                let version = dir.file_name()?.to_str()?.parse().ok()?;
                let package = std::fs::read_to_string(dir.join("version.txt")).ok()?.trim().to_string();
                dir.join("nginx").is_file().then_some(Installation { version, package, dir })
            })
            .collect();
        out.sort_by_key(|i| i.version);
        out
    }

    /// Where `scripts/provision-nginx` puts its trees: `$NGINX_KETAMA_NGINX_DIR`, else `.nginx/` in this
    /// repository.
    pub fn default_root() -> PathBuf {
        std::env::var_os("NGINX_KETAMA_NGINX_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::repo_root().join(".nginx"))
    }
}

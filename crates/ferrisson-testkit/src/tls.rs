//! Throwaway TLS material for tests against a TLS-enabled `redis-server`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How to get the `openssl` command the certificates are made with.
pub const OPENSSL_INSTRUCTIONS: &str = "the TLS tests make their certificates with the \
`openssl` command: install it (`apt-get install -y openssl` on Debian/Ubuntu)";

/// A certificate authority made for one test run, with what a TLS test needs, as PEM files in
/// a temporary folder (gone on drop): the CA; a server certificate it signed for `localhost`
/// and `127.0.0.1`; a client certificate it signed (mutual TLS); and a second, unrelated CA
/// that signed nothing the server presents.
#[derive(Debug)]
pub struct TestCerts {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run openssl ({e}): {OPENSSL_INSTRUCTIONS}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// An EC P-256 key `name.key` and, for `subject`, a certificate signing request `name.csr`, or
/// with `self_signed` a CA certificate `name.crt` signed by the key itself.
fn key_and_certificate(
    dir: &Path,
    name: &str,
    subject: &str,
    self_signed: bool,
) -> Result<(), String> {
    let key = format!("{name}.key");
    let out = format!("{name}.{}", if self_signed { "crt" } else { "csr" });
    let mut args = vec!["req"];
    if self_signed {
        args.extend(["-x509", "-days", "2"]);
    }
    args.extend([
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &out,
        "-subj",
        subject,
    ]);
    openssl(dir, &args)
}

/// Signs `name.csr` with the CA `ca`, with the X.509 extensions `extensions`.
fn sign(dir: &Path, name: &str, ca: &str, extensions: &str) -> Result<(), String> {
    let ext = format!("{name}.ext");
    std::fs::write(dir.join(&ext), format!("{extensions}\n"))
        .map_err(|e| format!("cannot write {ext}: {e}"))?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-extfile",
            &ext,
        ],
    )
}

impl TestCerts {
    /// Makes the CA, the server and client certificates and the unrelated CA.
    ///
    /// # Errors
    ///
    /// A message saying how to get `openssl`, or what it refused.
    pub fn try_generate() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temp dir: {e}"))?;
        let path = dir.path();
        key_and_certificate(path, "ca", "/CN=ferrisson test CA", true)?;
        key_and_certificate(path, "other-ca", "/CN=an unrelated CA", true)?;
        key_and_certificate(path, "server", "/CN=localhost", false)?;
        sign(
            path,
            "server",
            "ca",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth",
        )?;
        key_and_certificate(path, "client", "/CN=ferrisson test client", false)?;
        sign(path, "client", "ca", "extendedKeyUsage=clientAuth")?;
        Ok(Self { dir })
    }

    /// The path of one of the PEM files: `ca.crt`, `server.crt`, `server.key`, `client.crt`,
    /// `client.key`, `other-ca.crt`.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// The contents of one of the PEM files ([`path`](Self::path)).
    ///
    /// # Panics
    ///
    /// When the file cannot be read (it was made by [`try_generate`](Self::try_generate)).
    #[allow(clippy::panic)]
    pub fn pem(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap_or_else(|e| panic!("reading {file}: {e}"))
    }
}

//! Reading a model directory's files: what is at a path is checked before it is opened
//! (opening a FIFO waits for a writer that may never come), and reading stops at a limit
//! (a link to `/dev/zero`, or a file that is not what its name says, would otherwise be
//! read whole into memory).

use std::io::Read;
use std::path::Path;

/// `config.json` and `trellis.json`: a few kilobytes in practice.
pub const JSON_CONFIG_LIMIT: u64 = 1 << 20;
/// `tokenizer.json`: T5's is 2.4 MB, the largest common ones (250k-token vocabularies)
/// under 20 MB.
pub const TOKENIZER_LIMIT: u64 = 64 << 20;

/// Why a file of a model directory cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// A directory is at the path.
    #[error("is a directory, not a file")]
    Directory,
    /// A FIFO, socket or device is at the path.
    #[error("is not a regular file (a FIFO, socket or device)")]
    NotRegular,
    /// A file over its size limit (or one that grows past it while read).
    #[error("is {size} bytes, over the limit of {} for this file", mib(*.limit))]
    TooLarge {
        /// What was seen, in bytes: the file's length, or what was read of a growing one.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Reading failed; a missing file is this with `NotFound`.
    #[error("cannot read: {0}")]
    Io(#[source] std::io::Error),
}

fn mib(bytes: u64) -> String {
    format!("{} MiB ({bytes} bytes)", bytes >> 20)
}

impl FileProblem {
    /// Whether nothing is at the path.
    pub fn is_missing(&self) -> bool {
        matches!(self, FileProblem::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Checks that `path` (links followed) is a regular file, without opening it; its length.
pub fn regular_file(path: &Path) -> Result<u64, FileProblem> {
    let meta = std::fs::metadata(path).map_err(FileProblem::Io)?;
    if meta.is_dir() {
        Err(FileProblem::Directory)
    } else if !meta.is_file() {
        Err(FileProblem::NotRegular)
    } else {
        Ok(meta.len())
    }
}

/// Reads a regular file of at most `limit` bytes.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, FileProblem> {
    let len = regular_file(path)?;
    if len > limit {
        return Err(FileProblem::TooLarge { size: len, limit });
    }
    let file = std::fs::File::open(path).map_err(FileProblem::Io)?;
    let mut bytes = Vec::with_capacity(len as usize);
    // The file may have grown since its length was read: never read past the limit.
    file.take(limit + 1).read_to_end(&mut bytes).map_err(FileProblem::Io)?;
    if bytes.len() as u64 > limit {
        return Err(FileProblem::TooLarge { size: bytes.len() as u64, limit });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_devices_fifos_and_big_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(matches!(read_limited(d, 10), Err(FileProblem::Directory)));
        assert!(read_limited(&d.join("none"), 10).unwrap_err().is_missing());
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        assert!(matches!(read_limited(&d.join("zero"), 10), Err(FileProblem::NotRegular)));
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // Opening it would wait for a writer forever: refused from its metadata.
        assert!(matches!(read_limited(&fifo, 10), Err(FileProblem::NotRegular)));
        std::fs::write(d.join("big"), vec![b'x'; 11]).unwrap();
        let e = read_limited(&d.join("big"), 10).unwrap_err();
        assert!(matches!(e, FileProblem::TooLarge { size: 11, limit: 10 }), "{e:?}");
        assert_eq!(
            FileProblem::TooLarge { size: 3 << 20, limit: 1 << 20 }.to_string(),
            "is 3145728 bytes, over the limit of 1 MiB (1048576 bytes) for this file"
        );
        std::fs::write(d.join("ok"), b"0123456789").unwrap();
        assert_eq!(read_limited(&d.join("ok"), 10).unwrap(), b"0123456789");
    }
}

/// A file's length and IEEE CRC-32 (zlib's `crc32`), read in parts: what a listed-logits
/// step records of the decoder it was cut from (tools/train/listed_logits.py). Eight bytes
/// a round (slicing-by-8), so a large float decoder costs a fraction of its load.
pub(crate) fn size_and_crc32(path: &Path) -> std::io::Result<(u64, u32)> {
    const TABLES: [[u32; 256]; 8] = {
        let mut t = [[0u32; 256]; 8];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            t[0][i] = c;
            i += 1;
        }
        let mut j = 1;
        while j < 8 {
            let mut i = 0;
            while i < 256 {
                let prev = t[j - 1][i];
                t[j][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
                i += 1;
            }
            j += 1;
        }
        t
    };
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let (mut size, mut crc) = (0u64, !0u32);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        let mut chunks = buf[..n].chunks_exact(8);
        for c in &mut chunks {
            let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            crc = TABLES[7][(lo & 0xff) as usize]
                ^ TABLES[6][((lo >> 8) & 0xff) as usize]
                ^ TABLES[5][((lo >> 16) & 0xff) as usize]
                ^ TABLES[4][(lo >> 24) as usize]
                ^ TABLES[3][c[4] as usize]
                ^ TABLES[2][c[5] as usize]
                ^ TABLES[1][c[6] as usize]
                ^ TABLES[0][c[7] as usize];
        }
        for &b in chunks.remainder() {
            crc = TABLES[0][((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
        }
    }
    Ok((size, !crc))
}

#[cfg(test)]
mod crc_tests {
    #[test]
    fn crc32_is_zlibs() {
        // The standard check value of CRC-32/ISO-HDLC, and zlib.crc32(b"") == 0.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"123456789").unwrap();
        assert_eq!(super::size_and_crc32(&p).unwrap(), (9, 0xcbf4_3926));
        std::fs::write(&p, b"").unwrap();
        assert_eq!(super::size_and_crc32(&p).unwrap(), (0, 0));
        // Longer than one read: Python's zlib.crc32(bytes(range(256)) * 1000), run offline.
        let data: Vec<u8> = (0..256_000u32).map(|i| (i % 256) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        assert_eq!(super::size_and_crc32(&p).unwrap(), (256_000, 0xfc70_af1a));
        // Lengths that leave a remainder after the eight-byte rounds: Python's
        // zlib.crc32(b"123456789abcdefghijk"[:n]), run offline.
        for (n, want) in [(1usize, 0x83dc_efb7u32), (7, 0x5003_699f), (8, 0x9ae0_daaf), (13, 0x3f07_dc6d), (20, 0xd84e_2a0e)] {
            std::fs::write(&p, &b"123456789abcdefghijk"[..n]).unwrap();
            assert_eq!(super::size_and_crc32(&p).unwrap(), (n as u64, want), "{n} bytes");
        }
    }
}

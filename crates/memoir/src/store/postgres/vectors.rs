//! Per-session chunk vectors in PostgreSQL: pgvector (HNSW) when
//! available, else `real[]` with an exact scan.

use super::*;

/// The text PostgreSQL parses as a vector (`[..]`) or a `real[]` (`{..}`).
pub(super) fn vector_literal(v: &[f32], backend: VectorBackend) -> String {
    let (open, close) = match backend {
        VectorBackend::PgVector => ('[', ']'),
        VectorBackend::Plain => ('{', '}'),
    };
    let mut s = String::with_capacity(v.len() * 10 + 2);
    s.push(open);
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(close);
    s
}

pub(super) fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

pub(super) fn rows_to_hits(rows: &[postgres::Row]) -> Vec<VectorHit> {
    rows.iter()
        .map(|r| VectorHit {
            chain_seq: r.get::<_, i64>(0) as u64,
            score: r.get::<_, f32>(1),
        })
        .collect()
}

pub(super) fn sort_hits(hits: &mut [VectorHit]) {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.chain_seq.cmp(&b.chain_seq))
    });
}

impl PgStore {
    /// Insert or replace the vectors of `session`'s chunks, keyed by
    /// `chain_seq`, in one transaction. Every vector must have the same,
    /// non-zero width and only finite values. Returns how many were written.
    pub fn upsert_vectors(&self, session: &str, items: &[(u64, &[f32])]) -> Result<usize> {
        crate::id::validate(session)?;
        let Some(dims) = items.first().map(|(_, v)| v.len()) else {
            return Ok(0);
        };
        if dims == 0 || dims > 16000 {
            return Err(Error::Invalid(format!(
                "vector width {dims} is out of range"
            )));
        }
        let mut seqs = Vec::with_capacity(items.len());
        let mut texts = Vec::with_capacity(items.len());
        for (seq, v) in items {
            if v.len() != dims {
                return Err(Error::Invalid(format!(
                    "vector for chain_seq {seq} has width {}, expected {dims}",
                    v.len()
                )));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(Error::Invalid(format!(
                    "vector for chain_seq {seq} has a non-finite value"
                )));
            }
            seqs.push(seq_i64(*seq)?);
            texts.push(vector_literal(v, self.vectors));
        }
        let dims = dims as i32;
        let sql: &'static str = match self.vectors {
            VectorBackend::PgVector => {
                "INSERT INTO memoir_chunk_vectors (session_id, chain_seq, dims, embedding)
                 SELECT $1, t.s, $2, t.e::vector FROM unnest($3::bigint[], $4::text[]) AS t (s, e)
                 ON CONFLICT (session_id, chain_seq)
                 DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding"
            }
            VectorBackend::Plain => {
                "INSERT INTO memoir_chunk_vectors (session_id, chain_seq, dims, embedding)
                 SELECT $1, t.s, $2, t.e::real[] FROM unnest($3::bigint[], $4::text[]) AS t (s, e)
                 ON CONFLICT (session_id, chain_seq)
                 DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding"
            }
        };
        let n = self.run("postgres vector upsert", true, |c| {
            let s = c.stmt(sql)?;
            c.client.execute(&s, &[&session, &dims, &seqs, &texts])
        })?;
        Ok(n as usize)
    }

    /// Remove `session`'s vectors (one chunk, or all with `None`); returns how many.
    pub fn delete_vectors(&self, session: &str, chain_seq: Option<u64>) -> Result<usize> {
        let n = match chain_seq {
            Some(seq) => {
                let seq = seq_i64(seq)?;
                self.run("postgres vector delete", true, |c| {
                    let s = c.stmt(
                        "DELETE FROM memoir_chunk_vectors WHERE session_id = $1 AND chain_seq = $2",
                    )?;
                    c.client.execute(&s, &[&session, &seq])
                })?
            }
            None => self.run("postgres vector delete", true, |c| {
                let s = c.stmt("DELETE FROM memoir_chunk_vectors WHERE session_id = $1")?;
                c.client.execute(&s, &[&session])
            })?,
        };
        Ok(n as usize)
    }

    /// The `top_k` chunks of `session` closest to `query` by cosine
    /// similarity, best first (ties by `chain_seq`). Only vectors of the
    /// query's width take part.
    pub fn search_vectors(
        &self,
        session: &str,
        query: &[f32],
        top_k: usize,
        how: VectorSearch,
    ) -> Result<Vec<VectorHit>> {
        if query.is_empty() || query.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid("query vector is empty or not finite".into()));
        }
        if top_k == 0 {
            return Ok(Vec::new());
        }
        let dims = query.len() as i32;
        let k = top_k.min(10_000) as i64;
        match self.vectors {
            VectorBackend::Plain => self.search_plain(session, query, top_k),
            VectorBackend::PgVector => {
                let q = vector_literal(query, VectorBackend::PgVector);
                let mut hits = match how {
                    VectorSearch::Exact => self.run("postgres vector search", true, |c| {
                        let s = c.stmt(
                            "SELECT chain_seq, (1 - (embedding <=> $2::text::vector))::real
                             FROM memoir_chunk_vectors WHERE session_id = $1 AND dims = $3
                             ORDER BY embedding <=> $2::text::vector, chain_seq LIMIT $4",
                        )?;
                        let rows = c.client.query(&s, &[&session, &q, &dims, &k])?;
                        Ok(rows_to_hits(&rows))
                    })?,
                    VectorSearch::Index => {
                        self.ensure_hnsw(dims)?;
                        let sql = format!(
                            "SELECT chain_seq, (1 - (embedding::vector({dims}) <=> $2::text::vector({dims})))::real
                             FROM memoir_chunk_vectors WHERE dims = {dims} AND session_id = $1
                             ORDER BY embedding::vector({dims}) <=> $2::text::vector({dims}) LIMIT $3"
                        );
                        let ef = (k * 2).clamp(40, 1000);
                        self.run("postgres vector search", true, |c| {
                            let mut tx = c.client.transaction()?;
                            tx.batch_execute(&format!(
                                "SET LOCAL hnsw.ef_search = {ef}; \
                                 SET LOCAL hnsw.iterative_scan = relaxed_order;"
                            ))?;
                            let rows = tx.query(&sql, &[&session, &q, &k])?;
                            tx.commit()?;
                            Ok(rows_to_hits(&rows))
                        })?
                    }
                };
                sort_hits(&mut hits);
                Ok(hits)
            }
        }
    }

    pub(super) fn ensure_hnsw(&self, dims: i32) -> Result<()> {
        let sql = format!(
            "CREATE INDEX IF NOT EXISTS memoir_chunk_vectors_hnsw_{dims} ON memoir_chunk_vectors
             USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE dims = {dims}"
        );
        self.run("postgres vector index", true, |c| {
            c.client.batch_execute(&sql)
        })
    }

    pub(super) fn search_plain(
        &self,
        session: &str,
        query: &[f32],
        top_k: usize,
    ) -> Result<Vec<VectorHit>> {
        let dims = query.len() as i32;
        let rows = self.run("postgres vector search", true, |c| {
            let s = c.stmt(
                "SELECT chain_seq, embedding FROM memoir_chunk_vectors
                 WHERE session_id = $1 AND dims = $2",
            )?;
            c.client.query(&s, &[&session, &dims])
        })?;
        let qn = norm(query);
        let mut hits: Vec<VectorHit> = rows
            .iter()
            .map(|r| {
                let v: Vec<f32> = r.get(1);
                let dot: f32 = v.iter().zip(query).map(|(a, b)| a * b).sum();
                let denom = norm(&v) * qn;
                VectorHit {
                    chain_seq: r.get::<_, i64>(0) as u64,
                    score: if denom > 0.0 { dot / denom } else { 0.0 },
                }
            })
            .collect();
        sort_hits(&mut hits);
        hits.truncate(top_k);
        Ok(hits)
    }
}

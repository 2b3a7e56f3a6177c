//! The informer's first full state: consistent LIST pages through the blocking client, or one
//! `resourceVersion=0` LIST served from the API server's watch cache, read as a stream a page's
//! worth of items per loop turn (falling back to pages when it fails or takes too long).

use super::*;

/// Limit on a whole `resourceVersion=0` LIST, body included (the client's per-call timeout is
/// for small answers). Only the first full state is such a list, before anything is decided;
/// one that takes longer falls back to consistent pages.
const CACHE_LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// A `resourceVersion=0` LIST being read, a page's worth of items per loop turn.
pub(super) struct CacheList {
    path: String,
    stream: ListStream<Box<dyn Read>>,
}

impl<T: Watched, S: Clone, K: Eq + Hash + Clone> Informer<T, S, K> {
    pub(super) fn list_page(
        &mut self,
        io: &mut InformerIo<'_, S, K>,
        request: ListRequest,
        out: &mut Vec<Delta<T>>,
    ) {
        if request.from_watch_cache {
            self.open_cache_list(io, request, out);
            return;
        }
        let path = request.path_and_query::<T>();
        let result = io.client.get_bytes(&path);
        let now = io.lp.now();
        let failure = match result {
            Ok(bytes) => {
                self.list_pages += 1;
                self.list_bytes += bytes.len() as u64;
                match decode_list::<T>(&bytes, io.decode) {
                    Ok(page) => {
                        for skipped in &page.skipped {
                            warn!("{} list: skipping an object: {skipped}", T::KIND);
                        }
                        let last = page.continue_token.is_none();
                        self.reflector.list_page_received(now, page, out);
                        if last {
                            info!(
                                "{} list complete: {} objects",
                                T::KIND,
                                self.reflector.stats().objects
                            );
                        }
                        return;
                    }
                    Err(e) => ListFailure {
                        gone: false,
                        message: format!("GET {path}: {e}"),
                    },
                }
            }
            Err(ApiError::Throttled { until }) => {
                self.throttled_lists += 1;
                self.postponed_list = Some((request, until));
                return;
            }
            Err(ApiError::TooManyRequests { .. }) => {
                // The client now holds every call back until the server's Retry-After.
                self.throttled_lists += 1;
                self.postponed_list = Some((request, io.client.next_admission()));
                return;
            }
            Err(ApiError::Gone(status)) => ListFailure {
                gone: true,
                message: status.to_string(),
            },
            Err(e) => ListFailure {
                gone: false,
                message: e.to_string(),
            },
        };
        warn!("{} list failed: {}", T::KIND, failure.message);
        self.reflector.list_failed(now, failure);
    }

    /// Sends a `resourceVersion=0` LIST and reads its first items.
    pub(super) fn open_cache_list(
        &mut self,
        io: &mut InformerIo<'_, S, K>,
        request: ListRequest,
        out: &mut Vec<Delta<T>>,
    ) {
        let path = request.path_and_query::<T>();
        let accept = self.content_type.accept();
        match io.client.get_streamed(&path, CACHE_LIST_TIMEOUT, accept) {
            Ok((content_type, body)) => {
                let body: Box<dyn Read> = Box::new(body);
                let stream = if proto::is_protobuf(&content_type) {
                    self.protobuf_lists += 1;
                    ListStream::protobuf(body)
                } else {
                    ListStream::new(body)
                };
                self.cache_list = Some(CacheList { path, stream });
                self.read_cache_list(io, out);
            }
            Err(ApiError::Throttled { until }) => {
                self.throttled_lists += 1;
                self.postponed_list = Some((request, until));
            }
            Err(ApiError::TooManyRequests { .. }) => {
                self.throttled_lists += 1;
                self.postponed_list = Some((request, io.client.next_admission()));
            }
            Err(e) => self.cache_list_failed(io, format!("{e}")),
        }
    }

    /// Hands on the next page's worth of items of the streamed LIST (blocking only while they
    /// arrive; the timer brings the loop back for the rest).
    pub(super) fn read_cache_list(
        &mut self,
        io: &mut InformerIo<'_, S, K>,
        out: &mut Vec<Delta<T>>,
    ) {
        let Some(list) = &mut self.cache_list else {
            return;
        };
        let before = list.stream.bytes();
        let result = list.stream.next_batch::<T>(self.batch, io.decode);
        self.list_bytes += list.stream.bytes() - before;
        let page = match result {
            Ok(page) => page,
            Err(e) => {
                let message = format!("GET {}: {e}", list.path);
                self.cache_list = None;
                self.cache_list_failed(io, message);
                return;
            }
        };
        for skipped in &page.skipped {
            warn!("{} list: skipping an object: {skipped}", T::KIND);
        }
        if page.continue_token.is_some() {
            self.reflector.list_items_received(page, out);
            return;
        }
        let Some(list) = self.cache_list.take() else {
            return;
        };
        let bytes = list.stream.bytes();
        // The rest is at most whitespace (JSON) or nothing (protobuf, read to its end); reading
        // it keeps the connection reusable.
        let _ = std::io::copy(&mut list.stream.into_reader(), &mut std::io::sink());
        self.list_pages += 1;
        self.reflector.list_page_received(io.lp.now(), page, out);
        info!(
            "{} list complete: {} objects ({} KiB from the watch cache)",
            T::KIND,
            self.reflector.stats().objects,
            bytes / 1024
        );
    }

    pub(super) fn cache_list_failed(&mut self, io: &mut InformerIo<'_, S, K>, message: String) {
        warn!(
            "{} list from the watch cache failed: {message}; listing in consistent pages",
            T::KIND
        );
        let now = io.lp.now();
        self.reflector.list_failed(
            now,
            ListFailure {
                gone: false,
                message,
            },
        );
    }
}

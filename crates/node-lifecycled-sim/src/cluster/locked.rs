//! The store behind its lock, as the HTTP handlers and `Cluster` reach it.

use super::*;

/// Operations on the shared store used by the HTTP handlers and `Cluster`. Each takes the lock
/// once, and wakes watches after a change.
impl Shared {
    pub(crate) fn get_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.lock().get(resource, key)
    }

    pub(crate) fn create_object(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        value: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let now = self.clock.now();
        let result =
            self.lock()
                .create(self.settings.history_size, now, resource, namespace, value);
        self.changed.notify_all();
        result
    }

    /// Returns (new, old).
    pub(crate) fn update_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
        scope: Scope,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<(Arc<StoredObject>, Arc<StoredObject>), ApiError> {
        let result = self
            .lock()
            .modify(self.settings.history_size, resource, key, scope, change);
        self.changed.notify_all();
        result
    }

    pub(crate) fn patch_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
        scope: Scope,
        patch_type: PatchType,
        patch: &Value,
    ) -> Result<(Arc<StoredObject>, Arc<StoredObject>), ApiError> {
        self.update_object(resource, key, scope, |mut value| {
            patch::apply(patch_type, resource, &mut value, patch).map_err(|e| match e {
                PatchError::Malformed(m) => ApiError::bad_request(m),
                PatchError::Unprocessable(m) => ApiError::invalid(resource, &key.name, &m),
            })?;
            Ok(value)
        })
    }

    pub(crate) fn delete_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let now = self.clock.now();
        let result = self.lock().delete(
            self.settings.history_size,
            now,
            self.settings.finalize_pod_deletes,
            resource,
            key,
            options,
        );
        self.changed.notify_all();
        result
    }

    pub(crate) fn list_objects(
        &self,
        resource: Resource,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        self.lock().list(resource, filter, limit, continue_token)
    }

    /// Blocks until a change of `resource` after `cursor`, a fault aimed at watches, shutdown or
    /// `deadline`.
    pub(crate) fn wait_changes(
        &self,
        resource: Resource,
        cursor: &mut u64,
        seen: &mut SeenFaults,
        deadline: Instant,
    ) -> Wakeup {
        let mut state = self.lock();
        loop {
            let mut wakeup = Wakeup::default();
            let now = Instant::now();
            if state.shutdown || self.is_shutting_down() {
                wakeup.shutdown = true;
                return wakeup;
            }
            if state.faults.watch_drop_generation != seen.drop {
                seen.drop = state.faults.watch_drop_generation;
                wakeup.dropped = true;
                return wakeup;
            }
            if state.faults.watch_corrupt_generation != seen.corrupt {
                seen.corrupt = state.faults.watch_corrupt_generation;
                wakeup.corrupt = true;
                return wakeup;
            }
            if state.take_changes(resource, cursor, now, &mut wakeup) || now >= deadline {
                return wakeup;
            }
            let mut wait_until = deadline;
            if let Some(until) = state.faults.stall_until.filter(|u| *u > now) {
                wait_until = wait_until.min(until);
            }
            state = self
                .changed
                .wait_timeout(state, wait_until.saturating_duration_since(now))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

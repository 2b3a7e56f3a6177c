//! Unit tests of the streamed LIST: items split out of a body arriving in pieces, in batches, with
//! bounded buffering, and malformed or endless bodies refused.

use super::*;
use crate::model::Lease;

fn lease(name: &str, rv: u32) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"kube-node-lease","resourceVersion":"{rv}","managedFields":[{{"a":"x\"]}}"}}]}},"spec":{{"holderIdentity":"{name}","renewTime":"2024-01-01T00:00:0{}.000000Z"}}}}"#,
        rv % 10
    )
}

fn list_body(n: u32) -> Vec<u8> {
    let items: Vec<String> = (0..n).map(|i| lease(&format!("n{i}"), i)).collect();
    format!(
        "{{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{{\"resourceVersion\":\"4242\"}},\n\"items\":[{}]}}\n",
        items.join(",\n")
    )
    .into_bytes()
}

/// A reader handing out `step` bytes at a time, however much is asked.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn read_all(
    body: Vec<u8>,
    step: usize,
    batch: usize,
) -> Result<(Vec<Lease>, String, usize), StreamError> {
    let mut stream = ListStream::new(Trickle {
        data: body,
        at: 0,
        step,
    });
    let mut ctx = DecodeContext::new();
    let mut all = Vec::new();
    let mut batches = 0;
    loop {
        let page = stream.next_batch::<Lease>(batch, &mut ctx)?;
        batches += 1;
        assert!(page.items.len() <= batch);
        all.extend(page.items);
        if page.continue_token.is_none() {
            return Ok((all, page.resource_version, batches));
        }
    }
}

#[test]
fn a_watch_cache_list_arriving_in_pieces_yields_every_item_and_the_list_version() {
    for step in [1, 7, 100, 4096, 1 << 20] {
        let (items, rv, _) = read_all(list_body(50), step, 500).unwrap();
        assert_eq!(items.len(), 50, "step {step}");
        assert_eq!(&*items[49].name, "n49");
        assert_eq!(&*items[3].resource_version, "3");
        assert_eq!(rv, "4242");
    }
}

#[test]
fn items_come_in_batches_of_the_page_size_so_the_store_takes_them_as_they_arrive() {
    let (items, _, batches) = read_all(list_body(1_001), 4096, 500).unwrap();
    assert_eq!(items.len(), 1_001);
    assert_eq!(batches, 3);
}

#[test]
fn the_buffer_holds_about_one_read_not_the_response() {
    let body = list_body(2_000);
    let total = body.len();
    let mut stream = ListStream::new(Trickle {
        data: body,
        at: 0,
        step: 64 << 10,
    });
    let mut ctx = DecodeContext::new();
    let mut most = 0;
    loop {
        let page = stream.next_batch::<Lease>(1, &mut ctx).unwrap();
        most = most.max(stream.pending());
        if page.continue_token.is_none() {
            break;
        }
    }
    assert!(total > 300_000, "{total}");
    assert!(most <= (64 << 10) + 1024, "held {most} bytes of {total}");
}

#[test]
fn an_empty_or_null_item_list_is_complete() {
    for body in [
        &br#"{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}"#[..],
        br#"{"metadata":{"resourceVersion":"7"},"items":null}"#,
        br#"{"metadata":{"resourceVersion":"7"}}"#,
    ] {
        let (items, rv, _) = read_all(body.to_vec(), 3, 10).unwrap();
        assert!(items.is_empty());
        assert_eq!(rv, "7");
    }
}

#[test]
fn a_continue_token_in_the_metadata_is_kept() {
    let mut s = ListSplitter::new();
    s.push(br#"{"metadata":{"resourceVersion":"9","continue":"abc"},"items":[]}"#);
    assert_eq!(s.next_item().unwrap(), Next::End);
    assert_eq!(s.continue_token(), Some("abc"));
}

#[test]
fn an_undecodable_item_is_skipped_and_the_rest_still_arrive() {
    let body = format!(
        r#"{{"metadata":{{"resourceVersion":"1"}},"items":[{},{{"metadata":{{}}}},{}]}}"#,
        lease("a", 1),
        lease("b", 2)
    );
    let mut stream = ListStream::new(body.as_bytes());
    let page = stream
        .next_batch::<Lease>(10, &mut DecodeContext::new())
        .unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.skipped.len(), 1);
    assert!(page.continue_token.is_none());
}

#[test]
fn a_body_cut_short_or_malformed_is_an_error_naming_the_list() {
    let mut body = list_body(10);
    body.truncate(body.len() / 2);
    let e = read_all(body, 100, 500).unwrap_err();
    assert!(e.to_string().contains("inside the list"), "{e}");
    for bad_body in [
        &b"[1,2]"[..],
        b"{\"items\":[{}}",
        b"{\"items\" [",
        b"{\"items\":[{} {}]}",
        b"{\"items\":[1}}",
    ] {
        let e = read_all(bad_body.to_vec(), 2, 500).unwrap_err();
        assert!(e.to_string().contains("list"), "{e}");
    }
}

#[test]
fn an_item_without_end_is_refused_past_the_limit_instead_of_buffered() {
    let mut s = ListSplitter::new();
    s.push(b"{\"items\":[{\"a\":\"");
    let filler = vec![b'x'; 1 << 20];
    let mut refused = false;
    for _ in 0..(MAX_ITEM_BYTES >> 20) + 2 {
        s.push(&filler);
        match s.next_item() {
            Ok(Next::NeedMore) => {}
            Err(e) => {
                assert!(e.to_string().contains("larger than"), "{e}");
                refused = true;
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(refused);
}

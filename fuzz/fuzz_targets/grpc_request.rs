//! gRPC request messages of the client port, decoded as the engine decodes them (prost's
//! `Message::decode` of the etcd v3 request types, which both tonic's codec and the engine's own
//! unary KV path call): never a panic; a Txn nested past prost's recursion limit is refused, not
//! followed; what decodes encodes to `encoded_len` bytes and decodes back to the same message.
//!
//! Input: one byte picking the request type, then the message bytes.
#![no_main]

use ballast_proto::etcdserverpb as pb;
use ballast_proto::{v3electionpb, v3lockpb};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// Decodes `bytes` as `M` and checks the round trip.
fn check<M: Message + Default + PartialEq>(bytes: &[u8]) {
    let Ok(message) = M::decode(bytes) else { return };
    let encoded = message.encode_to_vec();
    assert_eq!(encoded.len(), message.encoded_len(), "encoded_len disagrees with encode");
    let back = M::decode(encoded.as_slice()).expect("a message the engine decoded re-decodes once encoded");
    assert!(back == message, "decode-encode-decode changed the message");
}

/// How deep a Txn's requests nest.
fn txn_depth(txn: &pb::TxnRequest) -> usize {
    let inner = |ops: &[pb::RequestOp]| {
        ops.iter()
            .filter_map(|op| match &op.request {
                Some(pb::request_op::Request::RequestTxn(t)) => Some(txn_depth(t)),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    };
    1 + inner(&txn.success).max(inner(&txn.failure))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else { return };
    match pick % 24 {
        0 => check::<pb::RangeRequest>(bytes),
        1 => check::<pb::PutRequest>(bytes),
        2 => check::<pb::DeleteRangeRequest>(bytes),
        3 => {
            check::<pb::TxnRequest>(bytes);
            if let Ok(txn) = pb::TxnRequest::decode(bytes) {
                // prost's limit is 100 nested messages; a Txn level is two (RequestOp, TxnRequest).
                assert!(txn_depth(&txn) <= 51, "a Txn nested {} deep decoded", txn_depth(&txn));
            }
        }
        4 => check::<pb::CompactionRequest>(bytes),
        5 => check::<pb::WatchRequest>(bytes),
        6 => check::<pb::LeaseGrantRequest>(bytes),
        7 => check::<pb::LeaseRevokeRequest>(bytes),
        8 => check::<pb::LeaseKeepAliveRequest>(bytes),
        9 => check::<pb::LeaseTimeToLiveRequest>(bytes),
        10 => check::<pb::MemberAddRequest>(bytes),
        11 => check::<pb::MemberUpdateRequest>(bytes),
        12 => check::<pb::AlarmRequest>(bytes),
        13 => check::<pb::MoveLeaderRequest>(bytes),
        14 => check::<pb::HashKvRequest>(bytes),
        15 => check::<pb::AuthenticateRequest>(bytes),
        16 => check::<pb::AuthUserAddRequest>(bytes),
        17 => check::<pb::AuthRoleGrantPermissionRequest>(bytes),
        18 => check::<pb::AuthUserChangePasswordRequest>(bytes),
        19 => check::<v3lockpb::LockRequest>(bytes),
        20 => check::<v3lockpb::UnlockRequest>(bytes),
        21 => check::<v3electionpb::CampaignRequest>(bytes),
        22 => check::<v3electionpb::ProclaimRequest>(bytes),
        _ => check::<v3electionpb::ResignRequest>(bytes),
    }
});

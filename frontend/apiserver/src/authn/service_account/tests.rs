use std::collections::HashMap;
use std::sync::Mutex;

use super::*;

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

#[derive(Debug, Default)]
struct Objects(Mutex<HashMap<(&'static str, String), LiveObject>>);

impl Objects {
    fn put(&self, kind: &'static str, name: &str, uid: &str) {
        let object = LiveObject { uid: uid.into(), deletion_timestamp: None };
        self.0.lock().expect("lock").insert((kind, name.into()), object);
    }

    fn remove(&self, kind: &'static str, name: &str) {
        self.0.lock().expect("lock").remove(&(kind, name.to_string()));
    }
}

fn kind_name(kind: BoundKind) -> &'static str {
    match kind {
        BoundKind::ServiceAccount => "sa",
        BoundKind::Pod => "pod",
        BoundKind::Secret => "secret",
    }
}

impl ObjectGetter for Objects {
    fn get<'a>(
        &'a self,
        kind: BoundKind,
        _namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<LiveObject>, ApiError>> {
        let found = self.0.lock().expect("lock").get(&(kind_name(kind), name.to_string())).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }
}

struct Fixture {
    issuer: TokenIssuer,
    authn: ServiceAccountAuthenticator,
    objects: Arc<Objects>,
}

fn fixture() -> Fixture {
    let (key, _) = SigningKey::generate().expect("key");
    let objects = Arc::new(Objects::default());
    objects.put("sa", "bot", "sa-uid-1");
    let authn = ServiceAccountAuthenticator::new(
        vec![ISSUER.into()],
        vec![key.public().clone()],
        vec![ISSUER.into()],
        objects.clone(),
    );
    Fixture { issuer: TokenIssuer::new(ISSUER, key), authn, objects }
}

fn claims(aud: &[&str], exp_from_now: i64) -> Claims {
    let now = crate::clock::unix_now();
    Claims {
        aud: aud.iter().map(|a| a.to_string()).collect(),
        exp: Some(now + exp_from_now),
        iat: Some(now),
        nbf: Some(now),
        jti: "id-1".into(),
        sub: username("default", "bot"),
        kubernetes: Some(KubernetesClaims {
            namespace: "default".into(),
            serviceaccount: ObjectRef { name: "bot".into(), uid: "sa-uid-1".into() },
            ..KubernetesClaims::default()
        }),
        ..Claims::default()
    }
}

fn failure(outcome: TokenOutcome) -> String {
    match outcome {
        TokenOutcome::Failed(e) => e,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn valid_tokens_name_the_service_account_and_its_groups() {
    let f = fixture();
    let token = f.issuer.sign(claims(&[ISSUER], 3600)).expect("sign");
    let TokenOutcome::Authenticated { user, audiences } = f.authn.authenticate(&token, &[]).await else {
        panic!("not authenticated")
    };
    assert_eq!(user.name, "system:serviceaccount:default:bot");
    assert_eq!(user.uid, "sa-uid-1");
    assert_eq!(user.groups, vec!["system:serviceaccounts", "system:serviceaccounts:default"]);
    assert_eq!(user.extra[CREDENTIAL_ID_EXTRA], vec!["JTI=id-1"]);
    assert_eq!(audiences, vec![ISSUER]);
}

#[tokio::test]
async fn audiences_expiry_and_signatures_are_checked_with_kubes_messages() {
    let f = fixture();
    let other = f.issuer.sign(claims(&["vault"], 3600)).expect("sign");
    assert_eq!(
        failure(f.authn.authenticate(&other, &[]).await),
        format!(r#"token audiences ["vault"] is invalid for the target audiences ["{ISSUER}"]"#)
    );
    // A review may ask for the token's own audience.
    assert!(matches!(f.authn.authenticate(&other, &["vault".into()]).await, TokenOutcome::Authenticated { .. }));

    let expired = f.issuer.sign(claims(&[ISSUER], -3600)).expect("sign");
    assert_eq!(failure(f.authn.authenticate(&expired, &[]).await), "service account token has expired");
    // Within the leeway a just-expired token still works, as kube's.
    let just = f.issuer.sign(claims(&[ISSUER], -10)).expect("sign");
    assert!(matches!(f.authn.authenticate(&just, &[]).await, TokenOutcome::Authenticated { .. }));

    let token = f.issuer.sign(claims(&[ISSUER], 3600)).expect("sign");
    let mut parts: Vec<String> = token.split('.').map(String::from).collect();
    let mut payload: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).expect("b64")).expect("json");
    payload["sub"] = "system:serviceaccount:kube-system:admin".into();
    parts[1] = URL_SAFE_NO_PAD.encode(payload.to_string());
    assert_eq!(
        failure(f.authn.authenticate(&parts.join("."), &[]).await),
        "go-jose/go-jose: error in cryptographic primitive"
    );
    // Other issuers' tokens and non-JWTs are left to other authenticators.
    let (foreign_key, _) = SigningKey::generate().expect("key");
    let foreign = TokenIssuer::new("https://elsewhere", foreign_key).sign(claims(&[ISSUER], 3600)).expect("sign");
    assert_eq!(f.authn.authenticate(&foreign, &[]).await, TokenOutcome::NotMine);
    assert_eq!(f.authn.authenticate("abc.def", &[]).await, TokenOutcome::NotMine);
    // Our issuer but a key we do not hold.
    let (stranger, _) = SigningKey::generate().expect("key");
    let forged = TokenIssuer::new(ISSUER, stranger).sign(claims(&[ISSUER], 3600)).expect("sign");
    assert_eq!(failure(f.authn.authenticate(&forged, &[]).await), "invalid signature, no keys found");
}

#[tokio::test]
async fn tokens_die_with_their_service_account_and_bound_pod() {
    let f = fixture();
    f.objects.put("pod", "web", "pod-uid-1");
    let mut bound = claims(&[ISSUER], 3600);
    if let Some(k) = bound.kubernetes.as_mut() {
        k.pod = Some(ObjectRef { name: "web".into(), uid: "pod-uid-1".into() });
    }
    let token = f.issuer.sign(bound).expect("sign");
    let TokenOutcome::Authenticated { user, .. } = f.authn.authenticate(&token, &[]).await else {
        panic!("not authenticated")
    };
    assert_eq!(user.extra[POD_NAME_EXTRA], vec!["web"]);
    assert_eq!(user.extra[POD_UID_EXTRA], vec!["pod-uid-1"]);

    f.objects.put("pod", "web", "pod-uid-2");
    assert_eq!(
        failure(f.authn.authenticate(&token, &[]).await),
        "pod UID (pod-uid-2) does not match service account pod ref claim (pod-uid-1)"
    );
    f.objects.remove("pod", "web");
    assert_eq!(failure(f.authn.authenticate(&token, &[]).await), "service account token has been invalidated");

    let plain = f.issuer.sign(claims(&[ISSUER], 3600)).expect("sign");
    f.objects.put("sa", "bot", "sa-uid-2");
    assert_eq!(
        failure(f.authn.authenticate(&plain, &[]).await),
        "service account UID (sa-uid-2) does not match claim (sa-uid-1)"
    );
    f.objects.remove("sa", "bot");
    assert_eq!(failure(f.authn.authenticate(&plain, &[]).await), r#"serviceaccounts "bot" not found"#);
}

#[test]
fn claims_serialize_in_kubes_order_and_read_a_single_audience() {
    let mut c = claims(&["a"], 10);
    c.iss = ISSUER.into();
    let text = serde_json::to_string(&c).expect("json");
    let order: Vec<usize> =
        ["\"aud\"", "\"exp\"", "\"iat\"", "\"iss\"", "\"jti\"", "\"kubernetes.io\"", "\"nbf\"", "\"sub\""]
            .iter()
            .map(|k| text.find(k).unwrap_or_else(|| panic!("{k} in {text}")))
            .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    let one: Claims = serde_json::from_str(r#"{"aud":"x","iss":"i"}"#).expect("claims");
    assert_eq!(one.aud, vec!["x"]);
}

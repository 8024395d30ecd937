#!/usr/bin/env bash
# Makes the certificate set the frontend Deployment mounts from the Secret ballast-frontend-pki:
# the same six files `ballast frontend` generates for itself on first start (CA, serving and
# admin certificates and keys), made once here so every replica serves with one CA and one admin
# kubeconfig works against all of them. The serving certificate also names the frontend's
# Service, which the frontend's own certificates cannot know.
#
#   deploy/kubernetes/make-pki.sh DIR [NAMESPACE]
#
# writes DIR/{ca,apiserver,admin}.{crt,key} and DIR/admin.kubeconfig (for
# `kubectl port-forward svc/ballast-frontend 6443:6443`, so https://127.0.0.1:6443), and prints
# the command that creates the Secret. BALLAST_EXTRA_SANS adds subject alternative names to the
# serving certificate, e.g. BALLAST_EXTRA_SANS=DNS:api.example.com,IP:203.0.113.7 for a load
# balancer. Needs openssl. Refuses to overwrite an existing set.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
dir=$1
ns=${2:-default}
command -v openssl >/dev/null || { echo "make-pki: openssl not found" >&2; exit 1; }
[ ! -e "$dir/ca.key" ] || { echo "make-pki: $dir already holds a CA; remove it to make a new set" >&2; exit 1; }
mkdir -p "$dir"
umask 077

# ECDSA P-256, as the frontend's own generated keys.
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/$1"; }

key ca.key
openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=ballast-ca" -days 3650 -out "$dir/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"

# Signs $1.key's request for subject $2 with the CA, adding the extensions in $3.
sign() {
  openssl req -new -key "$dir/$1.key" -subj "$2" -out "$dir/$1.csr"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
    -extfile <(printf '%s\n' "$3") -out "$dir/$1.crt" 2>/dev/null
  rm -f "$dir/$1.csr"
}

sans="DNS:localhost,IP:127.0.0.1,IP:::1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
sans+=",DNS:ballast-frontend,DNS:ballast-frontend.$ns,DNS:ballast-frontend.$ns.svc"
[ -z "${BALLAST_EXTRA_SANS:-}" ] || sans+=",$BALLAST_EXTRA_SANS"
key apiserver.key
sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$sans"

# system:masters is the group kube's bootstrap policy binds to cluster-admin.
key admin.key
sign admin "/O=system:masters/CN=kubernetes-admin" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
rm -f "$dir/ca.srl"
chmod 644 "$dir/ca.crt" "$dir/apiserver.crt" "$dir/admin.crt"

b64() { base64 -w0 <"$dir/$1"; }
cat >"$dir/admin.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: ballast
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(b64 ca.crt)
users:
- name: kubernetes-admin
  user:
    client-certificate-data: $(b64 admin.crt)
    client-key-data: $(b64 admin.key)
contexts:
- name: kubernetes-admin@ballast
  context:
    cluster: ballast
    user: kubernetes-admin
current-context: kubernetes-admin@ballast
KUBECONFIG

echo "wrote $dir; create the Secret with:"
echo "  kubectl -n $ns create secret generic ballast-frontend-pki \\"
echo "    --from-file=$dir/ca.crt --from-file=$dir/ca.key --from-file=$dir/apiserver.crt \\"
echo "    --from-file=$dir/apiserver.key --from-file=$dir/admin.crt --from-file=$dir/admin.key"

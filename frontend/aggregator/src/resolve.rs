//! Where a Service named by an APIService is reached (kube-aggregator's service resolvers),
//! and the checks the availability controller makes of it first, with kube's reasons and
//! messages.

use serde_json::Value;

use crate::apiservice::ServiceRef;
use crate::informer::Objects;

/// Why a Service cannot be used: the `Available` condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The condition reason (`ServiceNotFound`, `ServicePortError`, ...).
    pub reason: &'static str,
    /// Its message.
    pub message: String,
}

/// `host:port` to connect to for `service`.
///
/// ExternalName Services resolve to their external name and the APIService's port (how an
/// extension server outside the cluster, or on this machine, is named); the other types to
/// their cluster IP and the port, or with `endpoints` (aggregator routing) to a ready
/// endpoint address of their EndpointSlices and the matching endpoint port.
///
/// # Errors
///
/// The reason the Service is unusable.
pub fn resolve(
    service: &ServiceRef,
    services: &Objects,
    endpoint_slices: Option<&Objects>,
) -> Result<(String, u16), Unresolved> {
    let svc = check(service, services, endpoint_slices)?;
    let spec = &svc["spec"];
    if spec["type"] == "ExternalName" {
        let host = spec["externalName"].as_str().unwrap_or("").trim_end_matches('.');
        return Ok((host.to_string(), service.port));
    }
    let port = find_port(spec, service.port).ok_or_else(|| port_error(service))?;
    if let Some(slices) = endpoint_slices {
        let name = port["name"].as_str().unwrap_or("");
        return ready_endpoint(service, slices, name).ok_or_else(|| missing_endpoints(service, name));
    }
    let ip = spec["clusterIP"].as_str().filter(|ip| !ip.is_empty() && *ip != "None");
    match ip {
        Some(ip) => Ok((ip.to_string(), service.port)),
        None => Err(Unresolved {
            reason: "ServiceNotFound",
            message: format!("service/{} in {:?} has no cluster IP", service.name, service.namespace),
        }),
    }
}

/// kube's checks before the discovery GET: the Service exists and, for a ClusterIP Service,
/// listens on the port and has a ready endpoint for it. Returns the Service.
///
/// # Errors
///
/// The first check that fails.
pub fn check<'a>(
    service: &ServiceRef,
    services: &'a Objects,
    endpoint_slices: Option<&Objects>,
) -> Result<&'a Value, Unresolved> {
    let key = format!("{}/{}", service.namespace, service.name);
    let Some(svc) = services.get(&key) else {
        return Err(Unresolved {
            reason: "ServiceNotFound",
            message: format!("service/{} in {:?} is not present", service.name, service.namespace),
        });
    };
    let spec = &svc["spec"];
    let cluster_ip = spec["type"].as_str().is_none_or(|t| t == "ClusterIP");
    if cluster_ip {
        let port = find_port(spec, service.port).ok_or_else(|| port_error(service))?;
        if let Some(slices) = endpoint_slices {
            let name = port["name"].as_str().unwrap_or("");
            let owned: Vec<&Value> = slices_of(service, slices).collect();
            if owned.is_empty() {
                return Err(Unresolved {
                    reason: "EndpointsNotFound",
                    message: format!(
                        "cannot find endpointslices for service/{} in {:?}",
                        service.name, service.namespace
                    ),
                });
            }
            if ready_endpoint(service, slices, name).is_none() {
                return Err(missing_endpoints(service, name));
            }
        }
    }
    Ok(svc)
}

fn find_port(spec: &Value, port: u16) -> Option<&Value> {
    spec["ports"].as_array()?.iter().find(|p| p["port"].as_u64() == Some(u64::from(port)))
}

fn port_error(service: &ServiceRef) -> Unresolved {
    Unresolved {
        reason: "ServicePortError",
        message: format!(
            "service/{} in {:?} is not listening on port {}",
            service.name, service.namespace, service.port
        ),
    }
}

fn missing_endpoints(service: &ServiceRef, port_name: &str) -> Unresolved {
    Unresolved {
        reason: "MissingEndpoints",
        message: format!(
            "endpointslices for service/{} in {:?} have no addresses with port name {port_name:?}",
            service.name, service.namespace
        ),
    }
}

fn slices_of<'a>(service: &'a ServiceRef, slices: &'a Objects) -> impl Iterator<Item = &'a Value> + 'a {
    slices.values().filter(move |s| {
        s["metadata"]["namespace"] == service.namespace.as_str()
            && s["metadata"]["labels"]["kubernetes.io/service-name"] == service.name.as_str()
    })
}

/// The first ready endpoint address of the Service's slices with a port named `port_name`.
fn ready_endpoint(service: &ServiceRef, slices: &Objects, port_name: &str) -> Option<(String, u16)> {
    slices_of(service, slices).find_map(|s| {
        let port = s["ports"]
            .as_array()?
            .iter()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())?;
        let address = s["endpoints"].as_array()?.iter().find_map(|e| {
            let ready = e["conditions"]["ready"].as_bool().unwrap_or(true);
            ready.then(|| e["addresses"][0].as_str()).flatten()
        })?;
        Some((address.to_string(), port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn svc_ref() -> ServiceRef {
        ServiceRef { namespace: "ns".into(), name: "api".into(), port: 443 }
    }

    fn objects(items: &[(&str, Value)]) -> Objects {
        Arc::new(items.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<BTreeMap<_, _>>())
    }

    #[test]
    fn external_name_and_cluster_ip() {
        let ext = objects(&[("ns/api", json!({"spec": {"type": "ExternalName", "externalName": "localhost."}}))]);
        assert_eq!(resolve(&svc_ref(), &ext, None), Ok(("localhost".into(), 443)));
        let cip = objects(&[("ns/api", json!({"spec": {"clusterIP": "10.0.0.7", "ports": [{"port": 443}]}}))]);
        assert_eq!(resolve(&svc_ref(), &cip, None), Ok(("10.0.0.7".into(), 443)));
        let none = objects(&[]);
        let err = resolve(&svc_ref(), &none, None).expect_err("missing");
        assert_eq!((err.reason, err.message.as_str()), ("ServiceNotFound", "service/api in \"ns\" is not present"));
        let wrong_port = objects(&[("ns/api", json!({"spec": {"clusterIP": "10.0.0.7", "ports": [{"port": 80}]}}))]);
        assert_eq!(resolve(&svc_ref(), &wrong_port, None).expect_err("port").reason, "ServicePortError");
    }

    #[test]
    fn endpoint_slices_with_aggregator_routing() {
        let cip = objects(&[(
            "ns/api",
            json!({"spec": {"clusterIP": "10.0.0.7", "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}),
        )]);
        let empty = objects(&[]);
        assert_eq!(resolve(&svc_ref(), &cip, Some(&empty)).expect_err("none").reason, "EndpointsNotFound");
        let slice = |ready: bool| {
            objects(&[(
                "ns/api-x",
                json!({"metadata": {"namespace": "ns", "labels": {"kubernetes.io/service-name": "api"}},
                       "ports": [{"name": "https", "port": 8443}],
                       "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": ready}}]}),
            )])
        };
        let err = resolve(&svc_ref(), &cip, Some(&slice(false))).expect_err("not ready");
        assert_eq!(err.reason, "MissingEndpoints");
        assert_eq!(err.message, "endpointslices for service/api in \"ns\" have no addresses with port name \"https\"");
        assert_eq!(resolve(&svc_ref(), &cip, Some(&slice(true))), Ok(("10.1.0.5".into(), 8443)));
    }
}

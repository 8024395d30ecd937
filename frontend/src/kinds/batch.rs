//! batch/v1: jobs and cronjobs. Jobs get kube's generated selector (the `controller-uid`
//! labels on the template, a selector on the uid) unless `manualSelector` is set, and kube's
//! defaults (completions and parallelism 1, backoffLimit 6, ...).

use serde_json::{json, Value};

use super::categories::ALL_CATEGORY;
use super::pod_spec::{default_template, validate_template};
use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::object::meta_str;
use ballast_apiserver::registry::strategy::{default_at, get_path, map_field_mut, path_mut, Object, Strategy};
use ballast_apiserver::registry::validation::non_negative;
use ballast_apiserver::registry::{ResourceKind, Subresources};

/// The batch/v1 rows.
pub static ROWS: &[&ResourceKind] = &[
    &ResourceKind::row("batch", "v1", "cronjobs", "CronJob", "cronjob", true)
        .short(&["cj"])
        .categories(ALL_CATEGORY)
        .sub(Subresources::STATUS)
        .generation(&["spec"])
        .rules(&CronJobStrategy),
    &ResourceKind::row("batch", "v1", "jobs", "Job", "job", true)
        .categories(ALL_CATEGORY)
        .sub(Subresources::STATUS)
        .generation(&["spec"])
        .selectors(&[
            ("metadata.name", "metadata.name"),
            ("metadata.namespace", "metadata.namespace"),
            ("status.successful", "status.successful"),
        ])
        .rules(&JobStrategy),
];

const JOB_RESTART_POLICIES: &[&str] = &["OnFailure", "Never"];

/// Defaults a job template without inventing a restart policy: kube leaves it for validation
/// to demand one of `OnFailure` or `Never`.
fn default_job_template(obj: &mut Object, path: &[&str]) {
    let rp: Vec<&str> = [path, &["spec", "restartPolicy"]].concat();
    let had_policy = get_path(obj, &rp).and_then(Value::as_str).is_some_and(|p| !p.is_empty());
    default_template(obj, path);
    if !had_policy && get_path(obj, path).is_some() {
        path_mut(obj, &[path, &["spec"]].concat()).remove("restartPolicy");
    }
}

fn default_job_spec(obj: &mut Object, spec: &[&str]) {
    let at = |p: &[&str]| -> Vec<String> { spec.iter().chain(p).map(|s| s.to_string()).collect() };
    let get = |obj: &Object, p: &[&str]| {
        let path = at(p);
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        get_path(obj, &path).cloned()
    };
    let set = |obj: &mut Object, p: &[&str], v: Value| {
        let path = at(p);
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        default_at(obj, &path, v);
    };
    if get(obj, &["completions"]).is_none() && get(obj, &["parallelism"]).is_none() {
        set(obj, &["completions"], 1.into());
    }
    set(obj, &["parallelism"], 1.into());
    set(obj, &["backoffLimit"], 6.into());
    set(obj, &["completionMode"], "NonIndexed".into());
    set(obj, &["suspend"], false.into());
    if get(obj, &["podFailurePolicy"]).is_none() {
        set(obj, &["podReplacementPolicy"], "TerminatingOrFailed".into());
    }
    let template: Vec<&str> = [spec, &["template"]].concat();
    default_job_template(obj, &template);
}

/// Jobs.
#[derive(Debug)]
struct JobStrategy;

impl Strategy for JobStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        let manual = get_path(obj, &["spec", "manualSelector"]).and_then(Value::as_bool) == Some(true);
        if !manual {
            let uid = meta_str(obj, "uid").to_string();
            let name = meta_str(obj, "name").to_string();
            let labels = path_mut(obj, &["spec", "template", "metadata", "labels"]);
            for (k, v) in [
                ("batch.kubernetes.io/controller-uid", &uid),
                ("batch.kubernetes.io/job-name", &name),
                ("controller-uid", &uid),
                ("job-name", &name),
            ] {
                labels.insert(k.into(), v.as_str().into());
            }
            map_field_mut(obj, "spec")
                .insert("selector".into(), json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
        }
        let job_labels_empty =
            get_path(obj, &["metadata", "labels"]).and_then(Value::as_object).is_none_or(|l| l.is_empty());
        if job_labels_empty {
            if let Some(labels) = get_path(obj, &["spec", "template", "metadata", "labels"]).cloned() {
                map_field_mut(obj, "metadata").insert("labels".into(), labels);
            }
        }
        default_job_spec(obj, &["spec"]);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for f in ["parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"] {
            errs.extend(non_negative(&format!("spec.{f}"), get_path(obj, &["spec", f])));
        }
        let selector = get_path(obj, &["spec", "selector"]);
        if selector.is_none() {
            errs.push(FieldError::required("spec.selector", ""));
        }
        validate_template(
            get_path(obj, &["spec", "template"]),
            selector,
            "spec.template",
            JOB_RESTART_POLICIES,
            &mut errs,
        );
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, old: &Object) {
        // The generated selector is kept: an update that omits it keeps the stored one.
        if get_path(new, &["spec", "selector"]).is_none() {
            if let Some(sel) = get_path(old, &["spec", "selector"]).cloned() {
                map_field_mut(new, "spec").insert("selector".into(), sel);
            }
        }
        default_job_spec(new, &["spec"]);
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        for f in ["selector", "template", "completionMode"] {
            let v = get_path(new, &["spec", f]);
            if v != get_path(old, &["spec", f]) {
                errs.push(FieldError::invalid(
                    format!("spec.{f}"),
                    v.cloned().unwrap_or(Value::Null),
                    "field is immutable",
                ));
            }
        }
        errs
    }
}

/// Returns the problem with a cron schedule, if any (five fields or a `@` descriptor).
fn schedule_problem(schedule: &str) -> Option<String> {
    let fields = schedule.split_whitespace().count();
    let descriptor = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]
        .contains(&schedule)
        || schedule.starts_with("@every ");
    (!descriptor && fields != 5).then(|| format!("expected exactly 5 fields, found {fields}: {schedule}"))
}

/// CronJobs.
#[derive(Debug)]
struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        default_at(obj, &["spec", "concurrencyPolicy"], "Allow".into());
        default_at(obj, &["spec", "suspend"], false.into());
        default_at(obj, &["spec", "successfulJobsHistoryLimit"], 3.into());
        default_at(obj, &["spec", "failedJobsHistoryLimit"], 1.into());
        default_job_template(obj, &["spec", "jobTemplate", "spec", "template"]);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match get_path(obj, &["spec", "schedule"]).and_then(Value::as_str).unwrap_or("") {
            "" => errs.push(FieldError::required("spec.schedule", "")),
            s => errs.extend(schedule_problem(s).map(|p| FieldError::invalid("spec.schedule", s, p))),
        }
        errs.extend(ballast_apiserver::registry::validation::supported_if_set(
            "spec.concurrencyPolicy",
            get_path(obj, &["spec", "concurrencyPolicy"]),
            &["Allow", "Forbid", "Replace"],
        ));
        validate_template(
            get_path(obj, &["spec", "jobTemplate", "spec", "template"]),
            None,
            "spec.jobTemplate.spec.template",
            JOB_RESTART_POLICIES,
            &mut errs,
        );
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_selector_and_defaults() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {
            "containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}})
        .as_object()
        .cloned()
        .expect("object");
        JobStrategy.prepare_for_create(&mut job);
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}));
        assert_eq!(job["spec"]["template"]["metadata"]["labels"]["job-name"], "pi");
        assert_eq!(job["metadata"]["labels"]["controller-uid"], "u-1");
        assert_eq!((job["spec"]["completions"].clone(), job["spec"]["parallelism"].clone()), (json!(1), json!(1)));
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert!(JobStrategy.validate(&job).is_empty(), "{:?}", JobStrategy.validate(&job));

        let mut no_policy = job.clone();
        no_policy["spec"]["template"]["spec"].as_object_mut().expect("spec").remove("restartPolicy");
        JobStrategy.prepare_for_update(&mut no_policy, &job);
        let errs: Vec<String> = JobStrategy.validate(&no_policy).iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            vec![r#"spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#]
        );
    }

    #[test]
    fn cron_schedules() {
        assert_eq!(schedule_problem("*/5 * * * *"), None);
        assert_eq!(schedule_problem("@hourly"), None);
        assert_eq!(schedule_problem("bogus").as_deref(), Some("expected exactly 5 fields, found 1: bogus"));
    }
}

//! The declared signatures of the functions rules may call, as kube's CEL environment declares
//! them: the standard library's functions (operators aside), optional values' functions, the
//! strings extension at kube's
//! version 2, CEL's sets extension, and kube's quantity, lists, regex, URL, IP, CIDR, format
//! and semver libraries. The type checker resolves a call against these overloads as cel-go
//! does, so a call the declarations do not allow is refused when the definition is admitted,
//! as kube refuses it, instead of failing each time the rule runs.
//!
//! The interpreter's functions are registered by each library's module (typed overloads on
//! the environment, or functions of the context that check their arguments as they run); this
//! table is what they accept, written once for the checker. `cel_signatures_sync`'s test evaluates a
//! call of every overload here to keep the two in step.

/// A parameter or result type of an overload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Param {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// Anything (`dyn`), or a result the checker does not follow (an optional value).
    Dyn,
    /// The overload's type parameter: every use binds the same type.
    A,
    List(&'static Param),
    Map(&'static Param, &'static Param),
    /// A library's own type, by cel-go's name of it.
    Opaque(&'static str),
    /// A type, as a value (`type(x)`).
    Type,
    /// An optional value of the type.
    Optional(&'static Param),
}

pub(crate) const QUANTITY: &str = "kubernetes.Quantity";
pub(crate) const URL: &str = "kubernetes.URL";
pub(crate) const IP: &str = "net.IP";
pub(crate) const CIDR: &str = "net.CIDR";
pub(crate) const SEMVER: &str = "kubernetes.Semver";
pub(crate) const FORMAT: &str = "kubernetes.NamedFormat";

/// The functions of the library kube's environment adds at the version served (semver, 1.33):
/// a rule already stored may call them, a new one not yet, as kube checks new rules in the
/// environment of its minimum compatibility version, the version before. (`compareTo`,
/// `isGreaterThan` and `isLessThan` stay: the quantity library declares them too.)
pub(crate) const STORED_ONLY: &[&str] = &["semver", "isSemver", "major", "minor", "patch"];

/// One overload: a member overload's first parameter is its receiver.
#[derive(Debug)]
pub(crate) struct Overload {
    pub(crate) function: &'static str,
    pub(crate) member: bool,
    pub(crate) params: &'static [Param],
    pub(crate) result: Param,
}

use Param::{Bool, Bytes, Double, Duration, Dyn, Int, Opaque, String, Timestamp, Uint, A};

const fn global(function: &'static str, params: &'static [Param], result: Param) -> Overload {
    Overload { function, member: false, params, result }
}

const fn member(function: &'static str, params: &'static [Param], result: Param) -> Overload {
    Overload { function, member: true, params, result }
}

const LIST_A: Param = Param::List(&A);
const OPTIONAL_A: Param = Param::Optional(&A);
const LIST_STRING: Param = Param::List(&String);
const MAP_AB: Param = Param::Map(&A, &Dyn);

/// The format library's named formats, each `format.<name>()`.
pub(crate) const NAMED_FORMATS: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// Every overload, by function.
pub(crate) static OVERLOADS: &[Overload] = &[
    // The standard library.
    global("size", &[String], Int),
    global("size", &[Bytes], Int),
    global("size", &[LIST_A], Int),
    global("size", &[MAP_AB], Int),
    member("size", &[String], Int),
    member("size", &[Bytes], Int),
    member("size", &[LIST_A], Int),
    member("size", &[MAP_AB], Int),
    global("bool", &[Bool], Bool),
    global("bool", &[String], Bool),
    global("bytes", &[Bytes], Bytes),
    global("bytes", &[String], Bytes),
    global("double", &[Double], Double),
    global("double", &[Int], Double),
    global("double", &[String], Double),
    global("double", &[Uint], Double),
    global("duration", &[Duration], Duration),
    global("duration", &[String], Duration),
    global("int", &[Int], Int),
    global("int", &[Double], Int),
    global("int", &[Duration], Int),
    global("int", &[String], Int),
    global("int", &[Timestamp], Int),
    global("int", &[Uint], Int),
    global("string", &[String], String),
    global("string", &[Bool], String),
    global("string", &[Bytes], String),
    global("string", &[Double], String),
    global("string", &[Duration], String),
    global("string", &[Int], String),
    global("string", &[Timestamp], String),
    global("string", &[Uint], String),
    global("string", &[Opaque(IP)], String),
    global("string", &[Opaque(CIDR)], String),
    global("timestamp", &[Timestamp], Timestamp),
    global("timestamp", &[Int], Timestamp),
    global("timestamp", &[String], Timestamp),
    global("uint", &[Uint], Uint),
    global("uint", &[Double], Uint),
    global("uint", &[Int], Uint),
    global("uint", &[String], Uint),
    global("type", &[A], Param::Type),
    member("contains", &[String, String], Bool),
    member("endsWith", &[String, String], Bool),
    member("startsWith", &[String, String], Bool),
    global("matches", &[String, String], Bool),
    member("matches", &[String, String], Bool),
    member("getFullYear", &[Timestamp], Int),
    member("getFullYear", &[Timestamp, String], Int),
    member("getMonth", &[Timestamp], Int),
    member("getMonth", &[Timestamp, String], Int),
    member("getDayOfYear", &[Timestamp], Int),
    member("getDayOfYear", &[Timestamp, String], Int),
    member("getDayOfMonth", &[Timestamp], Int),
    member("getDayOfMonth", &[Timestamp, String], Int),
    member("getDate", &[Timestamp], Int),
    member("getDate", &[Timestamp, String], Int),
    member("getDayOfWeek", &[Timestamp], Int),
    member("getDayOfWeek", &[Timestamp, String], Int),
    member("getHours", &[Timestamp], Int),
    member("getHours", &[Timestamp, String], Int),
    member("getHours", &[Duration], Int),
    member("getMinutes", &[Timestamp], Int),
    member("getMinutes", &[Timestamp, String], Int),
    member("getMinutes", &[Duration], Int),
    member("getSeconds", &[Timestamp], Int),
    member("getSeconds", &[Timestamp, String], Int),
    member("getSeconds", &[Duration], Int),
    member("getMilliseconds", &[Timestamp], Int),
    member("getMilliseconds", &[Timestamp, String], Int),
    member("getMilliseconds", &[Duration], Int),
    // Optional values.
    global("optional.of", &[A], OPTIONAL_A),
    global("optional.ofNonZeroValue", &[A], OPTIONAL_A),
    global("optional.none", &[], Param::Optional(&Dyn)),
    member("hasValue", &[OPTIONAL_A], Bool),
    member("value", &[OPTIONAL_A], A),
    member("orValue", &[OPTIONAL_A, A], A),
    member("or", &[OPTIONAL_A, OPTIONAL_A], OPTIONAL_A),
    // The strings extension, version 2.
    member("charAt", &[String, Int], String),
    member("indexOf", &[String, String], Int),
    member("indexOf", &[String, String, Int], Int),
    member("lastIndexOf", &[String, String], Int),
    member("lastIndexOf", &[String, String, Int], Int),
    member("lowerAscii", &[String], String),
    member("upperAscii", &[String], String),
    member("replace", &[String, String, String], String),
    member("replace", &[String, String, String, Int], String),
    member("split", &[String, String], LIST_STRING),
    member("split", &[String, String, Int], LIST_STRING),
    member("substring", &[String, Int], String),
    member("substring", &[String, Int, Int], String),
    member("trim", &[String], String),
    member("format", &[String, Param::List(&Dyn)], String),
    global("strings.quote", &[String], String),
    member("join", &[LIST_STRING], String),
    member("join", &[LIST_STRING, String], String),
    // The sets extension.
    global("sets.contains", &[LIST_A, LIST_A], Bool),
    global("sets.equivalent", &[LIST_A, LIST_A], Bool),
    global("sets.intersects", &[LIST_A, LIST_A], Bool),
    // kube's lists library (`isSorted`, `sum`, `min`, `max` follow, per element type).
    member("indexOf", &[LIST_A, A], Int),
    member("lastIndexOf", &[LIST_A, A], Int),
    // kube's regex library.
    member("find", &[String, String], String),
    member("findAll", &[String, String], LIST_STRING),
    member("findAll", &[String, String, Int], LIST_STRING),
    // kube's quantity library.
    global("quantity", &[String], Opaque(QUANTITY)),
    global("isQuantity", &[String], Bool),
    global("sign", &[Opaque(QUANTITY)], Int),
    member("sign", &[Opaque(QUANTITY)], Int),
    member("isGreaterThan", &[Opaque(QUANTITY), Opaque(QUANTITY)], Bool),
    member("isLessThan", &[Opaque(QUANTITY), Opaque(QUANTITY)], Bool),
    member("compareTo", &[Opaque(QUANTITY), Opaque(QUANTITY)], Int),
    member("asApproximateFloat", &[Opaque(QUANTITY)], Double),
    member("asInteger", &[Opaque(QUANTITY)], Int),
    member("isInteger", &[Opaque(QUANTITY)], Bool),
    member("add", &[Opaque(QUANTITY), Opaque(QUANTITY)], Opaque(QUANTITY)),
    member("add", &[Opaque(QUANTITY), Int], Opaque(QUANTITY)),
    member("sub", &[Opaque(QUANTITY), Opaque(QUANTITY)], Opaque(QUANTITY)),
    member("sub", &[Opaque(QUANTITY), Int], Opaque(QUANTITY)),
    // kube's URL library.
    global("url", &[String], Opaque(URL)),
    global("isURL", &[String], Bool),
    member("getScheme", &[Opaque(URL)], String),
    member("getHost", &[Opaque(URL)], String),
    member("getHostname", &[Opaque(URL)], String),
    member("getPort", &[Opaque(URL)], String),
    member("getEscapedPath", &[Opaque(URL)], String),
    member("getQuery", &[Opaque(URL)], Param::Map(&String, &LIST_STRING)),
    // kube's IP library.
    global("ip", &[String], Opaque(IP)),
    global("isIP", &[String], Bool),
    global("ip.isCanonical", &[String], Bool),
    member("family", &[Opaque(IP)], Int),
    member("isUnspecified", &[Opaque(IP)], Bool),
    member("isLoopback", &[Opaque(IP)], Bool),
    member("isLinkLocalMulticast", &[Opaque(IP)], Bool),
    member("isLinkLocalUnicast", &[Opaque(IP)], Bool),
    member("isGlobalUnicast", &[Opaque(IP)], Bool),
    // kube's CIDR library.
    global("cidr", &[String], Opaque(CIDR)),
    global("isCIDR", &[String], Bool),
    member("containsIP", &[Opaque(CIDR), String], Bool),
    member("containsIP", &[Opaque(CIDR), Opaque(IP)], Bool),
    member("containsCIDR", &[Opaque(CIDR), String], Bool),
    member("containsCIDR", &[Opaque(CIDR), Opaque(CIDR)], Bool),
    member("ip", &[Opaque(CIDR)], Opaque(IP)),
    member("prefixLength", &[Opaque(CIDR)], Int),
    member("masked", &[Opaque(CIDR)], Opaque(CIDR)),
    // kube's format library.
    global("format.named", &[String], Param::Optional(&Opaque(FORMAT))),
    member("validate", &[Opaque(FORMAT), String], Param::Optional(&LIST_STRING)),
    // kube's semver library.
    global("semver", &[String], Opaque(SEMVER)),
    global("semver", &[String, Bool], Opaque(SEMVER)),
    global("isSemver", &[String], Bool),
    global("isSemver", &[String, Bool], Bool),
    member("isGreaterThan", &[Opaque(SEMVER), Opaque(SEMVER)], Bool),
    member("isLessThan", &[Opaque(SEMVER), Opaque(SEMVER)], Bool),
    member("compareTo", &[Opaque(SEMVER), Opaque(SEMVER)], Int),
    member("major", &[Opaque(SEMVER)], Int),
    member("minor", &[Opaque(SEMVER)], Int),
    member("patch", &[Opaque(SEMVER)], Int),
];

/// The lists library's `isSorted`, `min` and `max` of each comparable element type, and
/// `sum` of each summable one.
macro_rules! per_element {
    (comparable: $($c:ident)*; summable: $($s:ident)*) => {
        &[
            $(
                member("isSorted", &[Param::List(&$c)], Bool),
                member("min", &[Param::List(&$c)], $c),
                member("max", &[Param::List(&$c)], $c),
            )*
            $(member("sum", &[Param::List(&$s)], $s),)*
        ]
    };
}

pub(crate) static LISTS: &[Overload] = per_element!(comparable: Int Uint Double Bool Duration Timestamp String Bytes;
    summable: Int Uint Double Duration);

/// A named format's constant, `format.<name>()`.
static NAMED_FORMAT: Overload = global("format.<name>", &[], Opaque(FORMAT));

/// The overloads by function, indexed once: the cost of a rule is bounded before each
/// evaluation by a walk that resolves every call.
type Index = std::collections::HashMap<&'static str, Vec<&'static Overload>>;
static BY_FUNCTION: std::sync::LazyLock<Index> = std::sync::LazyLock::new(|| {
    let mut index = Index::new();
    for o in OVERLOADS.iter().chain(LISTS) {
        index.entry(o.function).or_default().push(o);
    }
    index
});

/// The overloads of `function` (qualified, as `sets.contains`); none when nothing declares it.
pub(crate) fn overloads(function: &str) -> impl Iterator<Item = &'static Overload> + '_ {
    let named_format = function.strip_prefix("format.").is_some_and(|name| NAMED_FORMATS.contains(&name));
    BY_FUNCTION.get(function).into_iter().flatten().copied().chain(named_format.then_some(&NAMED_FORMAT))
}

use kube::CustomResourceExt;
fn main() {
    print!("{}", serde_saphyr::to_string(&herd_crds::agent::Agent::crd()).unwrap());
}

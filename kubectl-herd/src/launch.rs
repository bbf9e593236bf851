//! `kubectl herd run`: from its arguments (or a manifest) to the Run, checked against its
//! Agent, then created (or only printed with `--dry-run`), and printed, followed or waited for.

use herd_crds::run::Run;
use kube::ResourceExt;
use kube::api::PostParams;

use crate::cli::{DryRun, RunArgs};
use crate::connect::Cluster;
use crate::error::{CliError, api_error};
use crate::follow::{Mode, follow};
use crate::io::Io;
use crate::manifest::{RunRequest, check_duration, parse_label, run_manifest, ttl_seconds};
use crate::outcome::{EXIT_ANSWERED, EXIT_USAGE};
use crate::output::{Output, print_objects};
use crate::runs::runs;
use crate::start::{check_agent, read_files, read_manifest, start};

/// The request the flags make (for `run AGENT TASK`); or why they cannot (a usage error).
pub fn request(args: &RunArgs) -> Result<RunRequest, CliError> {
    let usage = |message: String| CliError {
        message,
        code: EXIT_USAGE,
    };
    let labels = args
        .labels
        .iter()
        .map(|l| parse_label(l))
        .collect::<Result<_, _>>()
        .map_err(usage)?;
    Ok(RunRequest {
        agent: args.agent.clone().unwrap_or_default(),
        task: args.task.clone().unwrap_or_default(),
        plan: args.plan,
        thinking: args.thinking,
        model: args.model.clone(),
        timeout: args
            .timeout
            .as_deref()
            .map(|t| check_duration("--timeout", t))
            .transpose()
            .map_err(usage)?,
        input_timeout: args
            .input_timeout
            .as_deref()
            .map(|t| check_duration("--input-timeout", t))
            .transpose()
            .map_err(usage)?,
        ttl_seconds: args
            .ttl
            .as_deref()
            .map(ttl_seconds)
            .transpose()
            .map_err(usage)?,
        labels,
        name: args.name.clone(),
        generate_name: args.generate_name.clone(),
    })
}

/// Runs `kubectl herd run`; the exit code.
pub async fn run_command(
    cluster: &Cluster,
    args: &RunArgs,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let manifest = args.filename.as_deref().map(read_manifest).transpose()?;
    let request = request(args)?;
    let files = read_files(&args.inputs)?;
    if let Some(run) = &manifest {
        in_namespace(run, cluster)?;
    }
    let agent = manifest
        .as_ref()
        .map_or(request.agent.clone(), |run| run.spec.agent_ref.name.clone());

    if args.dry_run == Some(DryRun::Client) {
        let run = match manifest {
            Some(run) => run,
            None => {
                let inputs = (!files.is_empty()).then(|| format!("{agent}-inputs-"));
                run_manifest(&request, inputs.as_deref()).map_err(CliError::new)?
            }
        };
        print_run(&run, args.output.as_ref(), "created (dry run)", io)?;
        return Ok(EXIT_ANSWERED);
    }

    agent_ready(cluster, &agent, args.wait, io).await?;

    let dry_run = args.dry_run == Some(DryRun::Server);
    let created = match manifest {
        Some(run) => create(cluster, &run, dry_run).await?,
        None => {
            let (created, warning) = start(cluster, &request, &files, dry_run).await?;
            if let Some(warning) = warning {
                let _ = writeln!(io.stderr, "warning: {warning}");
            }
            created
        }
    };
    if dry_run {
        print_run(
            &created,
            args.output.as_ref(),
            "created (server dry run)",
            io,
        )?;
        return Ok(EXIT_ANSWERED);
    }
    after_create(cluster, &created, args, io).await
}

/// Refuses a manifest whose namespace is not the one the command works in.
fn in_namespace(run: &Run, cluster: &Cluster) -> Result<(), CliError> {
    match run.metadata.namespace.as_deref() {
        Some(namespace) if namespace != cluster.namespace => Err(CliError::new(format!(
            "the manifest's namespace {namespace} is not the namespace {} the command works in \
             (give -n {namespace}, or leave metadata.namespace out)",
            cluster.namespace
        ))),
        _ => Ok(()),
    }
}

/// Warns when `agent` is not ready; refuses with `--wait`, which would only wait until the
/// Run times out.
async fn agent_ready(
    cluster: &Cluster,
    agent: &str,
    wait: bool,
    io: &mut Io<'_>,
) -> Result<(), CliError> {
    let Some(why) = check_agent(cluster, agent).await? else {
        return Ok(());
    };
    if wait {
        return Err(CliError::new(format!(
            "{why} (--wait would wait until the Run times out; kubectl herd agents shows \
             what it misses)"
        )));
    }
    let _ = writeln!(io.stderr, "warning: {why}; the Run waits until it is ready");
    Ok(())
}

/// Follows or waits for the `created` Run, or prints it and how to follow it; the exit code.
async fn after_create(
    cluster: &Cluster,
    created: &Run,
    args: &RunArgs,
    io: &mut Io<'_>,
) -> Result<u8, CliError> {
    let name = created.name_any();
    if args.follow || args.wait {
        let _ = writeln!(io.stderr, "Run {name} created");
        let mode = if args.wait { Mode::Quiet } else { Mode::Live };
        return follow(cluster, &name, mode, io).await;
    }
    match &args.output {
        Some(format) => print_run(created, Some(format), "created", io)?,
        None => {
            let _ = writeln!(io.stdout, "{name}");
        }
    }
    let _ = writeln!(
        io.stderr,
        "Run {name} created; follow it with: kubectl herd follow {name}"
    );
    Ok(EXIT_ANSWERED)
}

/// Creates the Run of a manifest.
async fn create(cluster: &Cluster, run: &Run, dry_run: bool) -> Result<Run, CliError> {
    let post = PostParams {
        dry_run,
        ..PostParams::default()
    };
    let object = format!("Run {}", run.name_any());
    runs(cluster).create(&post, run).await.map_err(|e| {
        api_error(
            &e,
            cluster.target("creating", &object, "the namespace may not exist"),
        )
    })
}

/// Prints `run` in `format`, or `run.herd.dev/<name> <what>` without one.
fn print_run(
    run: &Run,
    format: Option<&Output>,
    what: &str,
    io: &mut Io<'_>,
) -> Result<(), CliError> {
    match format.filter(|f| !f.is_table()) {
        Some(format) => {
            let text = print_objects(std::slice::from_ref(run), true, format)?;
            let _ = write!(io.stdout, "{text}");
        }
        None => {
            let name = run
                .metadata
                .name
                .clone()
                .or_else(|| run.metadata.generate_name.clone())
                .unwrap_or_default();
            let _ = writeln!(io.stdout, "run.herd.dev/{name} {what}");
        }
    }
    Ok(())
}

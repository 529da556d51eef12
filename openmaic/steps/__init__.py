"""The step functions: what every kind of session does to make a course, whatever orchestrates it.

A classic generation run (:mod:`openmaic.runs.kind`: a fixed pipeline on the durable runtime, each step's output
committed as its checkpoint), the headless API (which starts such runs) and the Pro session's generation tools
(:mod:`openmaic.workbench.tools`: a model choosing tools turn by turn) call the same functions here; only the
orchestration differs, i.e. when a step runs, what it is retried after and where its output is committed.

* :mod:`~openmaic.steps.brief` — what a step is asked for (a run's input, research sources);
* :mod:`~openmaic.steps.prompts` — the messages each step sends to its model slot;
* :mod:`~openmaic.steps.outputs` — what a step asks its models for, and the deterministic repairs of a reply
  that fits its schema but not the course;
* :mod:`~openmaic.steps.scenes` — the agents, scene-content and scene-actions steps;
* :mod:`~openmaic.steps.narration` — research before the outline, and each scene's narration clip;
* :mod:`~openmaic.steps.roster` — the built-in agents a step casts from.

A step function takes its services (the model router, the media router, the database for assets) and its inputs,
and returns values: it appends nothing and knows no stream. That is the orchestrator's job, which is why this
package sits below both kinds of session on the module map (docs/architecture.md) and imports neither.
"""

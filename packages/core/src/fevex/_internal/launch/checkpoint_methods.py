"""The app's methods that carry a run's conversation out of it and into a new run:
``export_checkpoint`` and ``restore_checkpoint`` (see
:mod:`fevex._internal.agents.portable_checkpoint`), with their blocking twins.

A restored run starts through the launcher like any run: it is stored with its
``run.started`` event (naming the run it was restored from), listed, traced, leased and
continued elsewhere like any other, under the caller's context and the app's current
definitions. An app with a checkpoint key signs what it exports and restores only what
that key signed, unless the caller says ``trusted=True``."""

from __future__ import annotations

from typing import Any

from fevex._internal.agents.checkpoint_signature import CheckpointSigner
from fevex._internal.agents.portable_checkpoint import (
    export_agent_checkpoint,
    restored_conversation,
)
from fevex._internal.composition.registry import Composition
from fevex._internal.engine.kernel import Kernel
from fevex._internal.engine.run_kind import LaunchRequest
from fevex._internal.launch.blocking_twins import blocking
from fevex._internal.launch.launcher import Launcher
from fevex._internal.launch.run_arguments import AgentInput, RunContext
from fevex._internal.launch.run_kinds import AGENT
from fevex.errors import FevexRunError
from fevex.runtime.run_result import RunResult

__all__ = ["CheckpointMethods"]


class CheckpointMethods:
    """``export_checkpoint`` and ``restore_checkpoint`` of :class:`fevex.Fevex`."""

    _kernel: Kernel
    _launcher: Launcher
    _composition: Composition
    # Set by create_fevex from checkpoint_key= or FEVEX_CHECKPOINT_KEY.
    _checkpoint_signer: CheckpointSigner | None = None

    async def export_checkpoint(self, run_id: str) -> dict[str, Any]:
        """The JSON checkpoint of the paused or ended agent run ``run_id``: its agent, the
        model and tools its conversation needs, its transcript and, when it is paused, the
        tool calls it waits on. It never holds the run's context (actor, namespace),
        approval decisions, credentials, leases, granted limits, usage or cost. With the
        app's checkpoint key, it is signed (its ``signature`` field).

        ``RUN_NOT_FOUND`` for no such run; ``CHECKPOINT_NOT_EXPORTABLE`` for a run still
        running or one that is not an agent run."""
        run = await self._kernel.get_run(run_id)
        stored = await self._kernel.store.get_checkpoint(run.id)
        if stored is None:
            raise FevexRunError(
                "CHECKPOINT_NOT_EXPORTABLE",
                f"Run {run.id} has no checkpoint to export.",
                run_id=run.id,
                details={"run_id": run.id, "reason": "missing", "status": run.status},
            )
        prepared = self._composition.agents.get(run.agent_name)
        exported = export_agent_checkpoint(run, stored, prepared)
        signer = self._checkpoint_signer
        return exported if signer is None else signer.signed(exported)

    async def check_checkpoint(self, checkpoint: dict[str, Any], *, trusted: bool = False) -> None:
        """Refuse, as ``restore_checkpoint`` would with the same ``trusted``, a
        ``checkpoint`` this app cannot restore; nothing is started."""
        restored_conversation(
            self._composition, checkpoint, self._checkpoint_signer, trusted=trusted
        )

    async def restore_checkpoint(
        self,
        checkpoint: dict[str, Any],
        input: AgentInput | None = None,
        *,
        context: RunContext = None,
        session_id: str | None = None,
        timeout: float | None = None,
        run_id: str | None = None,
        trusted: bool = False,
    ) -> RunResult[Any]:
        """Start a new run from an exported ``checkpoint`` and drive it to its end, as
        ``run_agent`` does: the conversation goes on with ``input`` as its next user
        message (for a run that ended), or with the tool calls a paused run waited on,
        asked again for approval (no input). The run is the app's current agent of that
        name, with its current model and tools, under ``context``; its limits and usage
        start afresh. ``session_id`` puts it in an existing session.

        Refused before anything is stored: ``CHECKPOINT_UNSUPPORTED`` for what is not an
        exported checkpoint (or one of a newer version, or whose ``version`` is not an
        integer); unless ``trusted``, ``CHECKPOINT_UNSIGNED`` for one without a signature,
        ``CHECKPOINT_KEY_MISSING`` when this app has no checkpoint key to verify one, and
        ``CHECKPOINT_SIGNATURE_INVALID`` for one changed since it was signed or signed
        with another key; ``CHECKPOINT_TRANSCRIPT_INVALID`` for a conversation no agent
        run has (a ``system`` message, a tool call id used twice, pending calls that are
        not its last assistant message's); ``CHECKPOINT_DEPENDENCY_MISSING`` when it names
        an agent, a model or a tool this app lacks (``details["missing"]``).

        ``trusted=True`` skips only the signature: the conversation is checked all the
        same, and its pending calls go through the app's policies and approvals as if the
        model had just asked for them."""
        restored = restored_conversation(
            self._composition, checkpoint, self._checkpoint_signer, trusted=trusted
        )
        request = LaunchRequest(restored, input, context, timeout, session_id, run_id)
        return await self._launcher.run(AGENT, request)

    export_checkpoint_sync = blocking(export_checkpoint)
    check_checkpoint_sync = blocking(check_checkpoint)
    restore_checkpoint_sync = blocking(restore_checkpoint)

/**
 * The panel's link to one notebook's kernel: the `nbdist` comm, opened and reopened.
 *
 *   bind(sessionContext) ─▶ kernel ready ─▶ silent `%load_ext nbdist` ─▶ comm_open
 *        ◀── snapshot / delta / error  ──▶ PanelModel.apply
 *   kernel restarting or replaced ─▶ model.reset(); connect again once it is idle
 *
 * Loading the extension silently (no history, no output, no execution count) registers the
 * kernel's comm target and tags each cell's work with its execute request, which is what lets
 * the panel name the cell of a task or wait and jump to it. It is idempotent.
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { PanelModel } from './model';
import { COMM_TARGET, KernelMessage as NbdistMessage, SCHEMA_VERSION } from './protocol';

export type LinkStatus =
  | 'no-notebook'
  | 'no-kernel'
  | 'connecting'
  | 'connected'
  | 'restarting'
  | 'unsupported'
  | 'failed';

// The load hook itself, not IPython's extension manager: a load through the manager counts
// nbdist as loaded, and the notebook's own `%load_ext nbdist` would then print "already
// loaded". The hook installs once per shell, so the notebook's load is a silent no-op.
const LOAD_CODE = "__import__('nbdist').load_ipython_extension(get_ipython())";

/** The panel's step-through commands (see `nbdist.jupyter.bridge.step_command`). */
export type StepCommand = 'on' | 'off' | 'step' | 'level' | 'run';

/** What the details and the wait rows ask the kernel (see `nbdist.jupyter.bridge.debug_query`):
 * a task's current Python stack, or why a wait waits. */
export type DebugQuery = 'stack' | 'why';

export interface DebugReply {
  status: 'ok' | 'error';
  text?: string;
  message?: string;
}

export interface StepReply {
  status: 'ok' | 'error';
  on?: boolean;
  held?: number;
  released?: number;
  message?: string;
}

// Step commands go on the control channel, not the comm: while a cell is blocked in `get` on
// a held task the kernel's shell thread is busy and a comm message would wait for the cell,
// which waits for the step. ipykernel answers control messages on a thread of their own.
const STEP_REQUEST = 'nbdist_step_request';
// The stack and "why" queries too: both are asked while a cell is blocked in a get.
const DEBUG_REQUEST = 'nbdist_debug_request';

export class KernelLink {
  status: LinkStatus = 'no-notebook';
  /** Why the status is 'unsupported' or 'failed', for the user. */
  detail = '';
  private context: ISessionContext | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private comm: Kernel.IComm | null = null;
  private attempt = 0;
  private disposed = false;

  constructor(
    private readonly model: PanelModel,
    private readonly changed: () => void
  ) {}

  /** Follow a notebook's session (or none). */
  bind(context: ISessionContext | null): void {
    if (context === this.context) {
      return;
    }
    if (this.context) {
      this.context.kernelChanged.disconnect(this.onKernelChanged, this);
      this.context.statusChanged.disconnect(this.onStatus, this);
      this.context.disposed.disconnect(this.onClosed, this);
    }
    this.context = context;
    if (context) {
      context.kernelChanged.connect(this.onKernelChanged, this);
      context.statusChanged.connect(this.onStatus, this);
      context.disposed.connect(this.onClosed, this);
    }
    this.useKernel(context?.session?.kernel ?? null);
  }

  /** Ask the kernel for a fresh snapshot, or connect again if the comm is gone. */
  refresh(): void {
    if (this.comm) {
      this.comm.send({ type: 'request_snapshot' });
    } else if (this.kernel && !this.disposed) {
      this.model.reset();
      void this.connect(this.kernel);
    }
  }

  dispose(): void {
    this.disposed = true;
    this.bind(null);
  }

  /** Send a step-through command to the kernel; its reply. */
  async step(command: StepCommand, count = 1): Promise<StepReply> {
    return (await this.control(STEP_REQUEST, { command, count })) as StepReply;
  }

  /** Ask the kernel for a task's stack or a wait's "why"; its reply. */
  async debug(what: DebugQuery, target: string): Promise<DebugReply> {
    return (await this.control(DEBUG_REQUEST, { what, target })) as DebugReply;
  }

  /** One request of nbdist's on the kernel's control channel; its reply's content. */
  private async control(
    msgType: string,
    content: Record<string, unknown>
  ): Promise<{ status: 'ok' | 'error'; message?: string }> {
    const kernel = this.kernel;
    if (!kernel || this.status !== 'connected') {
      return { status: 'error', message: 'The panel is not connected to a kernel.' };
    }
    // Not one of JupyterLab's control message types: built as one, typed as its own.
    const msg = KernelMessage.createMessage({
      msgType,
      channel: 'control',
      session: kernel.clientId,
      username: kernel.username,
      content
    } as unknown as KernelMessage.IOptions<KernelMessage.IInterruptRequestMsg>);
    const future = kernel.sendControlMessage(
      msg as unknown as KernelMessage.IControlMessage<'interrupt_request'>,
      true,
      true
    );
    const reply = await future.done;
    return reply.content as unknown as { status: 'ok' | 'error'; message?: string };
  }

  private set(status: LinkStatus, detail = ''): void {
    this.status = status;
    this.detail = detail;
    this.changed();
  }

  /** The notebook was closed: show nothing until another one is active. */
  private onClosed(): void {
    this.bind(null);
  }

  private onKernelChanged(): void {
    this.useKernel(this.context?.session?.kernel ?? null);
  }

  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this.dropComm();
      this.model.reset();
      if (status === 'dead') {
        this.set('failed', 'The kernel died.');
      } else {
        this.set('restarting');
      }
    } else if (status === 'idle' && !this.comm && this.kernel && this.status !== 'unsupported') {
      if (this.status === 'restarting') {
        void this.connect(this.kernel);
      }
    }
  }

  private useKernel(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this.kernel && this.comm) {
      return;
    }
    this.dropComm();
    this.kernel = kernel;
    this.model.reset();
    if (this.disposed) {
      return;
    }
    if (!this.context) {
      this.set('no-notebook');
    } else if (!kernel) {
      this.set('no-kernel');
    } else {
      void this.connect(kernel);
    }
  }

  private dropComm(): void {
    const comm = this.comm;
    this.comm = null;
    this.attempt++;
    if (comm && !comm.isDisposed) {
      comm.onClose = () => undefined;
      try {
        comm.close();
      } catch {
        // The kernel connection may already be gone: nothing left to close.
      }
    }
  }

  private async connect(kernel: Kernel.IKernelConnection): Promise<void> {
    const attempt = ++this.attempt;
    const current = () => attempt === this.attempt && kernel === this.kernel && !this.disposed;
    this.set('connecting');
    try {
      const info = await kernel.info;
      if (!current()) {
        return;
      }
      if (info.language_info.name !== 'python') {
        const language = info.language_info.name;
        this.set('unsupported', `This notebook's kernel runs ${language}; nbdist needs Python.`);
        return;
      }
      const reply = await kernel.requestExecute({
        code: LOAD_CODE,
        silent: true,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false
      }).done;
      if (!current()) {
        return;
      }
      const content = reply.content as KernelMessage.IExecuteReplyMsg['content'];
      if (content.status !== 'ok') {
        const err = content as KernelMessage.IReplyErrorContent;
        this.set(
          'unsupported',
          `nbdist could not be loaded in this kernel (${err.ename}: ${err.evalue}). ` +
            "Install nbdist in the kernel's environment."
        );
        return;
      }
      const comm = kernel.createComm(COMM_TARGET);
      this.comm = comm;
      comm.onMsg = msg => {
        if (current()) {
          this.model.apply(msg.content.data as unknown as NbdistMessage);
          if (this.status !== 'connected') {
            this.set('connected');
          } else {
            this.changed();
          }
        }
      };
      comm.onClose = () => {
        if (current() && this.comm === comm) {
          this.comm = null;
          this.model.connected = false;
          this.set(
            'failed',
            this.model.versionError ??
              this.model.kernelError ??
              'The kernel closed the nbdist comm.'
          );
        }
      };
      await comm.open({ schema: SCHEMA_VERSION }).done;
      this.model.connected = true;
    } catch (error) {
      if (current()) {
        this.set('failed', `Could not reach the kernel: ${error}`);
      }
    }
  }
}

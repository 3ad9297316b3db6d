// The documents attached to the question being written. The service reads
// them in the background (app/service/attach.go): a chip appears at once,
// follows the reading's progress through events, and ends with the token
// count or with the reason the file cannot be read. Before sending, the
// documents are checked against the context; when they do not fit, the
// window asks whether to keep the beginning or the end of each, or cancel.

import {
  AttachmentState,
  EventType,
  MaxUploadBytes,
  type AttachmentView,
  type Event,
  type FitView,
  type UI,
} from './gen/service';

/** Pasted text longer than this becomes an attachment instead of a wall of text in the box. */
export const pasteAttachChars = 4000;

/** The file name a pasted text gets. */
export const pastedName = 'Pasted text.txt';

export class Attachments {
  items: AttachmentView[] = $state([]);
  /** The budget check waiting for the user's choice, with the question it was made for. */
  pendingFit: { fit: FitView; text: string } | null = $state(null);

  readonly reading = $derived(this.items.some((a) => a.state === AttachmentState.Reading));
  readonly failed = $derived(this.items.some((a) => a.state === AttachmentState.Failed));

  constructor(private ui: () => UI) {}

  /**
   * Adds or updates a chip. A small file can be read before the call that
   * attached it returns: its events then come first, and the call's answer
   * (still "reading") must not take the chip back from its end state.
   */
  private put(view: AttachmentView): void {
    const i = this.items.findIndex((a) => a.id === view.id);
    if (i < 0) this.items.push(view);
    else if (this.items[i].state === AttachmentState.Reading) this.items[i] = view;
  }

  /** Applies an attachment event; returns whether it was one. */
  handle(event: Event): boolean {
    if (event.type !== EventType.Attachment || !event.attachment) return false;
    const view = event.attachment;
    // A chip removed here may still get its last progress event.
    if (this.removed.has(view.id)) return true;
    // While a chip is read again, the new chip's events can come before
    // the call that names it: an unknown chip waits, so that it takes the
    // old one's place rather than standing beside it for a moment.
    if (this.rereading > 0 && !this.items.some((a) => a.id === view.id)) {
      const held = this.held.get(view.id);
      if (!held || held.state === AttachmentState.Reading) this.held.set(view.id, view);
      return true;
    }
    this.put(view);
    return true;
  }

  /** Calls of reread not answered yet, and the unknown chips' events held meanwhile. */
  private rereading = 0;
  private held = new Map<string, AttachmentView>();

  /** Shows the chips held while no reread is waiting any more. */
  private release(): void {
    if (this.rereading > 0) return;
    const held = [...this.held.values()];
    this.held.clear();
    for (const view of held) if (!this.removed.has(view.id)) this.put(view);
  }

  private removed = new Set<string>();

  /** Sends files picked in the browser (the upload input, a drop, a paste). */
  async addFiles(files: Iterable<File>): Promise<void> {
    for (const file of files) {
      if (file.size > MaxUploadBytes) {
        throw new Error(
          `${file.name} is ${megabytes(file.size)}: the window attaches files of up to ${megabytes(MaxUploadBytes)}.`,
        );
      }
      const view = await this.ui().AttachData(file.name, await toBase64(file));
      this.put(view);
    }
  }

  /** Attaches a long pasted text as a text file. */
  async addText(text: string): Promise<void> {
    const bytes = new TextEncoder().encode(text);
    this.put(await this.ui().AttachData(pastedName, bytesToBase64(bytes)));
  }

  /** Shows the desktop's open-files dialog. */
  async choose(): Promise<void> {
    for (const view of await this.ui().ChooseFiles()) this.put(view);
  }

  /** The encodings a text file's chip offers; loaded when a chip first needs them. */
  encodings: string[] = $state([]);

  async loadEncodings(): Promise<void> {
    if (this.encodings.length === 0) this.encodings = await this.ui().TextEncodings();
  }

  /**
   * Reads a text file's chip again from another encoding: the service
   * answers with a new chip, being read, which takes the old one's place.
   */
  async reread(id: string, encoding: string): Promise<void> {
    this.rereading++;
    let view: AttachmentView;
    try {
      view = await this.ui().RereadAttachment(id, encoding);
    } catch (e) {
      this.rereading--;
      this.release();
      throw e;
    }
    this.rereading--;
    try {
      this.removed.add(id);
      // Its events may have come first: the latest is held, or shown.
      const held = this.held.get(view.id);
      this.held.delete(view.id);
      const next = this.items.find((a) => a.id === view.id) ?? (held && held.state !== AttachmentState.Reading ? held : view);
      this.items = this.items.filter((a) => a.id !== view.id).map((a) => (a.id === id ? next : a));
    } finally {
      this.release();
    }
  }

  async remove(id: string): Promise<void> {
    this.removed.add(id);
    this.items = this.items.filter((a) => a.id !== id);
    await this.ui().RemoveAttachment(id);
  }

  /** The ids to send: every chip, once all are read. */
  ids(): string[] {
    return this.items.map((a) => a.id);
  }

  /** Forgets the chips after a send took them. */
  clear(): void {
    for (const a of this.items) this.removed.add(a.id);
    this.items = [];
    this.pendingFit = null;
  }
}

/**
 * Why the question cannot be sent yet because of its documents, in words
 * shown beside Send: documents that could not be read must be removed
 * first; documents being read must finish. Empty when they do not block.
 */
export function sendBlockedReason(failed: string[], reading: boolean): string {
  if (failed.length === 1) return `Remove ${failed[0]} to send: it could not be read.`;
  if (failed.length > 1) return `Remove the ${failed.length} documents that could not be read to send.`;
  if (reading) return 'Send is ready when the documents are read.';
  return '';
}

/** A size for the user, as the service writes it ("20.5 MB"). */
function megabytes(n: number): string {
  return `${(n / 1e6).toFixed(1)} MB`;
}

/** A file's content in base64, through FileReader (read in the browser's own code, not byte by byte here). */
function toBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      resolve(url.slice(url.indexOf(',') + 1));
    };
    reader.onerror = () => reject(new Error(`${file.name}: the browser could not read the file (${reader.error?.message ?? 'unknown error'})`));
    reader.readAsDataURL(file);
  });
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

/** A file size for people: "812 bytes", "12.3 KB", "4.5 MB". */
export function formatSize(bytes: number): string {
  if (bytes < 1000) return `${bytes} bytes`;
  if (bytes < 1000 * 1000) return `${(bytes / 1000).toFixed(1)} KB`;
  return `${(bytes / 1000 / 1000).toFixed(1)} MB`;
}

/** A count with thousands separators, as the service's messages write them. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

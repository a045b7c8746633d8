// Wake-ups inside one process, for the in-process store.
import type { WakeEvent, WakeupBus } from "../store/room-store.js";

type Listener = (event: WakeEvent) => void;

export class LocalWakeupBus implements WakeupBus {
  private readonly listeners = new Map<string, Set<Listener>>();

  async watch(code: string, listener: Listener): Promise<() => void> {
    let set = this.listeners.get(code);
    if (!set) {
      set = new Set();
      this.listeners.set(code, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(code) === set) this.listeners.delete(code);
    };
  }

  /** In one process every publish reaches the listeners: listening is always free. */
  isListening(_code: string): boolean {
    return true;
  }

  publish(code: string, event: WakeEvent): void {
    const set = this.listeners.get(code);
    if (set) for (const listener of [...set]) listener(event);
  }
}

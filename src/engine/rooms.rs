//! The open model's rooms: room for one call at a time on each of a
//! thread's connections (`per_connection` rooms each), taken by the pacer
//! for each request it starts and, between their steps, by flows that give
//! their connection back.
//!
//! Why flows give it back: over HTTP (1.1 or h2) a connection carries no
//! session, so a flow waiting for its next step, or for an `until` to hold
//! (a transaction to be mined: seconds), need not hold one. One that did
//! made the connections the bound on flows in flight: 4 connections ran 4
//! sends to anvil at a time, and the rest queued for whole blocks.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use tokio::sync::{oneshot, Notify};

use super::slot::ConnectionSlot;

pub(super) struct Rooms {
    free: RefCell<VecDeque<usize>>,
    /// Flows waiting for a room, served before any new request and in
    /// turn: work under way ends before more begins.
    waiting: RefCell<VecDeque<oneshot::Sender<usize>>>,
    /// Wakes the pacer when a room comes free while it waits for one.
    freed: Notify,
    /// The pacer found no room: the next one given back wakes it (only
    /// then, so a call's end costs no wake-up of its own).
    pacer_waits: Cell<bool>,
    /// The thread's connections; a room's number is its connection's.
    slots: Vec<Rc<ConnectionSlot>>,
    /// Flows going on this thread that may give their connection back, and
    /// how many may at once: the bound on flows in flight.
    roaming: Cell<usize>,
    most_roaming: usize,
}

impl Rooms {
    /// `per_connection` rooms on each of `slots`, the first of each in
    /// turn, so calls spread over every connection before any carries two.
    pub(super) fn new(slots: Vec<Rc<ConnectionSlot>>, per_connection: usize, most_roaming: usize) -> Self {
        Rooms {
            free: RefCell::new((0..per_connection).flat_map(|_| 0..slots.len()).collect()),
            waiting: RefCell::default(),
            freed: Notify::new(),
            pacer_waits: Cell::new(false),
            slots,
            roaming: Cell::new(0),
            most_roaming,
        }
    }

    /// A free room for a new request, if one is (none while a flow waits).
    pub(super) fn try_take(&self) -> Option<usize> {
        self.free.borrow_mut().pop_front()
    }

    /// Whether a room is free now.
    pub(super) fn has_free(&self) -> bool {
        !self.free.borrow().is_empty()
    }

    /// A room for a flow's next step, waiting in turn for one to come free.
    pub(super) async fn take(&self) -> usize {
        if let Some(room) = self.try_take() {
            return room;
        }
        let (send, receive) = oneshot::channel();
        self.waiting.borrow_mut().push_back(send);
        // The sender is dropped only with the rooms (the thread's end).
        receive.await.unwrap_or(0)
    }

    /// A room free again: to the flow waiting longest, else to the pacer.
    pub(super) fn give_back(&self, room: usize) {
        let mut room = room;
        loop {
            let Some(waiter) = self.waiting.borrow_mut().pop_front() else {
                break;
            };
            // A waiter gone (its flow cut at the end) passes it on.
            match waiter.send(room) {
                Ok(()) => return,
                Err(back) => room = back,
            }
        }
        self.free.borrow_mut().push_back(room);
        if self.pacer_waits.replace(false) {
            self.freed.notify_one();
        }
    }

    /// The pacer found no room free.
    pub(super) fn wanted(&self) {
        self.pacer_waits.set(true);
    }

    /// Waits for a room to come free after `wanted` (the pacer).
    pub(super) async fn freed(&self) {
        self.freed.notified().await;
    }

    /// How many connections the rooms are on.
    pub(super) fn connections(&self) -> usize {
        self.slots.len()
    }

    /// The connection of room `room`.
    pub(super) fn slot(&self, room: usize) -> Rc<ConnectionSlot> {
        self.slots[room].clone()
    }

    /// A flow begins: whether it may give its connection back between
    /// steps (else the bound is reached, and it keeps the one it has).
    pub(super) fn begin_roaming(&self) -> bool {
        let roaming = self.roaming.get();
        let may = roaming < self.most_roaming;
        if may {
            self.roaming.set(roaming + 1);
        }
        may
    }

    /// A flow that roamed has ended.
    pub(super) fn end_roaming(&self) {
        self.roaming.set(self.roaming.get().saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rooms(connections: usize, per_connection: usize, most_roaming: usize) -> Rooms {
        let slots = (0..connections)
            .map(|_| Rc::new(ConnectionSlot::default()))
            .collect();
        Rooms::new(slots, per_connection, most_roaming)
    }

    #[test]
    fn rooms_spread_over_every_connection_first() {
        let rooms = rooms(3, 2, 0);
        let taken: Vec<usize> = std::iter::from_fn(|| rooms.try_take()).collect();
        assert_eq!(taken, [0, 1, 2, 0, 1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_flow_gets_the_room_before_the_pacer() {
        let rooms = Rc::new(rooms(1, 1, 8));
        let room = rooms.try_take().expect("one room");
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let waiting = rooms.clone();
                let flow = tokio::task::spawn_local(async move { waiting.take().await });
                tokio::task::yield_now().await;
                rooms.give_back(room);
                assert_eq!(rooms.try_take(), None, "the waiting flow took it");
                assert_eq!(flow.await.unwrap(), 0);
            })
            .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_gone_passes_the_room_on() {
        let rooms = Rc::new(rooms(1, 1, 8));
        let room = rooms.try_take().expect("one room");
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let waiting = rooms.clone();
                let gone = tokio::task::spawn_local(async move { waiting.take().await });
                tokio::task::yield_now().await;
                gone.abort();
                let _ = gone.await;
                rooms.give_back(room);
                assert_eq!(rooms.try_take(), Some(0), "free again");
            })
            .await;
    }

    #[test]
    fn flows_roam_up_to_the_bound() {
        let rooms = rooms(1, 1, 2);
        assert!(rooms.begin_roaming());
        assert!(rooms.begin_roaming());
        assert!(!rooms.begin_roaming(), "the third keeps its connection");
        rooms.end_roaming();
        assert!(rooms.begin_roaming());
    }
}

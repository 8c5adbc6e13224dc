#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};

    /// A write condition of 65 alternatives.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(List: ListMember::role == "r0" || ListMember::role == "r1" || ListMember::role == "r2" || ListMember::role == "r3" || ListMember::role == "r4" || ListMember::role == "r5" || ListMember::role == "r6" || ListMember::role == "r7" || ListMember::role == "r8" || ListMember::role == "r9" || ListMember::role == "r10" || ListMember::role == "r11" || ListMember::role == "r12" || ListMember::role == "r13" || ListMember::role == "r14" || ListMember::role == "r15" || ListMember::role == "r16" || ListMember::role == "r17" || ListMember::role == "r18" || ListMember::role == "r19" || ListMember::role == "r20" || ListMember::role == "r21" || ListMember::role == "r22" || ListMember::role == "r23" || ListMember::role == "r24" || ListMember::role == "r25" || ListMember::role == "r26" || ListMember::role == "r27" || ListMember::role == "r28" || ListMember::role == "r29" || ListMember::role == "r30" || ListMember::role == "r31" || ListMember::role == "r32" || ListMember::role == "r33" || ListMember::role == "r34" || ListMember::role == "r35" || ListMember::role == "r36" || ListMember::role == "r37" || ListMember::role == "r38" || ListMember::role == "r39" || ListMember::role == "r40" || ListMember::role == "r41" || ListMember::role == "r42" || ListMember::role == "r43" || ListMember::role == "r44" || ListMember::role == "r45" || ListMember::role == "r46" || ListMember::role == "r47" || ListMember::role == "r48" || ListMember::role == "r49" || ListMember::role == "r50" || ListMember::role == "r51" || ListMember::role == "r52" || ListMember::role == "r53" || ListMember::role == "r54" || ListMember::role == "r55" || ListMember::role == "r56" || ListMember::role == "r57" || ListMember::role == "r58" || ListMember::role == "r59" || ListMember::role == "r60" || ListMember::role == "r61" || ListMember::role == "r62" || ListMember::role == "r63" || ListMember::role == "r64"),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {}

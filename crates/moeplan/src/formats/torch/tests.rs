//! The torch reader's unit tests: the unpickler's limits, sharing and
//! detection, and each dump mode.

use super::pickle::*;
use super::*;
use crate::ReadLimits;

/// `stat` mode dumps its whole recorder buffer: the steps no pass filled
/// (all zero) are dropped, the recorded ones kept in order.
#[test]
fn stat_drops_the_buffer_steps_no_pass_filled() {
    let mut meter = Meter::new(ReadLimits::mib(1));
    let data = vec![
        0.0, 0.0, 4.0, 1.0, // step 0: layer 0 dense, layer 1 recorded
        0.0, 0.0, 0.0, 0.0, // step 1: an empty slot
        0.0, 0.0, 1.0, 5.0, // step 2
    ];
    let t = stat_trace(&[3, 2, 2], data, &mut meter).unwrap();
    assert_eq!(t.num_batches(), 2);
    assert_eq!(t.layer_ids(), &[1]);
    assert_eq!(t.counts().as_slice().unwrap(), &[4.0, 1.0, 1.0, 5.0]);
    let mut meter = Meter::new(ReadLimits::mib(1));
    assert!(stat_trace(&[2, 1, 2], vec![0.0; 4], &mut meter).is_err());
}

fn unpickle(bytes: &[u8], budget: ReadLimits) -> Result<(Arena, Id)> {
    let mut meter = Meter::new(budget);
    let mut u = Unpickler::new(bytes, &mut meter);
    let root = u.load()?;
    Ok((u.into_arena(), root))
}

/// `[]`, then `count` times a list of two references to the previous.
fn memo_bomb(count: u8) -> Vec<u8> {
    let mut p = b"\x80\x02]q\x00".to_vec();
    for i in 0..count {
        p.extend_from_slice(&[b'(', b'h', i, b'h', i, b'l', b'q', i + 1]);
    }
    p.push(b'.');
    p
}

#[test]
fn memo_gets_share_instead_of_copying() -> Result<()> {
    let (arena, root) = unpickle(&memo_bomb(60), ReadLimits::mib(1))?;
    // 2^60 elements as Python sees them, 61 nodes here.
    assert_eq!(arena.nodes.len(), 61);
    let children = arena.list(root).map(<[Id]>::to_vec);
    assert_eq!(children.as_ref().map(Vec::len), Some(2));
    assert_eq!(
        children.as_ref().and_then(|c| c.first()),
        children.as_ref().and_then(|c| c.get(1))
    );
    assert_eq!(arena.depth(root), 61);
    Ok(())
}

#[test]
fn nesting_is_refused_at_the_budget_depth_for_every_constructor() {
    let cases: [(&str, Vec<u8>); 5] = [
        ("TUPLE1", [b"N".as_slice(), &[0x85; 100]].concat()),
        (
            "TUPLE",
            [b"(".repeat(100), b"N".to_vec(), b"t".repeat(100)].concat(),
        ),
        ("APPEND", [b"]".repeat(100), b"a".repeat(99)].concat()),
        (
            "SETITEM",
            [b"}".to_vec(), b"K\x00}".repeat(100), b"s".repeat(100)].concat(),
        ),
        // x → os.system(x), forty times over, through the memo
        (
            "REDUCE",
            [
                b"N".as_slice(),
                &b"q\x000cos\nsystem\nh\x00\x85R".repeat(40),
            ]
            .concat(),
        ),
    ];
    for (name, body) in cases {
        let p = [b"\x80\x02".as_slice(), &body, b"."].concat();
        let e = unpickle(&p, ReadLimits::mib(1))
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nests deeper than 64 levels"), "{name}: {e}");
    }
}

#[test]
fn a_deep_arena_drops_without_recursion() -> Result<()> {
    // With the depth limit lifted, a million nested tuples still build
    // and drop flat (a recursive drop would overflow the test's stack).
    let budget = ReadLimits {
        max_depth: u32::MAX,
        ..ReadLimits::mib(256)
    };
    let p = [b"\x80\x02N".as_slice(), &[0x85; 1_000_000], b"."].concat();
    let (arena, root) = unpickle(&p, budget)?;
    assert_eq!(arena.depth(root), 1_000_001);
    drop(arena);
    Ok(())
}

#[test]
fn a_list_holding_itself_is_just_an_index() -> Result<()> {
    let (arena, root) = unpickle(b"\x80\x02]q\x00h\x00a.", ReadLimits::mib(1))?;
    assert_eq!(arena.list(root), Some(&[root][..]));
    Ok(())
}

#[test]
fn marks_fence_off_the_stack_below() {
    // APPEND inside a mark frame must not reach the list below the mark.
    let e = unpickle(b"\x80\x02](Na.", ReadLimits::mib(1))
        .map(drop)
        .unwrap_err();
    assert!(e.to_string().contains("underflow"), "{e}");
    let e = unpickle(b"\x80\x02N(\x85.", ReadLimits::mib(1))
        .map(drop)
        .unwrap_err();
    assert!(e.to_string().contains("underflow"), "{e}");
}

#[test]
fn long1_wider_than_64_bits_is_kept_as_bytes() -> Result<()> {
    let (arena, root) = unpickle(
        b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.",
        ReadLimits::mib(1),
    )?;
    assert!(matches!(arena.node(root), Some(Node::Long(b)) if **b == LEGACY_MAGIC));
    let (arena, root) = unpickle(b"\x80\x02\x8a\x02\x00\xff.", ReadLimits::mib(1))?;
    assert_eq!(arena.int(root), Some(-256));
    Ok(())
}

#[test]
fn every_allocation_is_charged() {
    // 100k empty lists at ~80 bytes each do not fit in 1 MiB.
    let p = [b"\x80\x02(".as_slice(), &b"]".repeat(100_000), b"l."].concat();
    let e = unpickle(&p, ReadLimits::mib(1))
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("reading limit"), "{e}");
    // A string is charged for its bytes.
    let mut s = b"\x80\x02X".to_vec();
    s.extend_from_slice(&(2u32 << 20).to_le_bytes());
    s.extend(std::iter::repeat_n(b'a', 2 << 20));
    s.push(b'.');
    let e = unpickle(&s, ReadLimits::mib(1))
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("reading limit"), "{e}");
}

#[test]
fn tensors_are_charged_by_shape_before_decoding() {
    let t = Tensor {
        storage: 0,
        offset: 0,
        size: vec![1_000_000, 1_000_000].into(),
        stride: vec![0, 0].into(),
    };
    let mut meter = Meter::new(ReadLimits::mib(8));
    let e = tensor_f64(&t, Dtype::I64, &[0; 8], &mut meter, "x").unwrap_err();
    assert!(matches!(e, Error::Limit(_)), "{e}");
    let t = Tensor {
        storage: 0,
        offset: 1,
        size: vec![2, 2].into(),
        stride: vec![1, 2].into(),
    };
    let data: Vec<u8> = (0u16..6)
        .flat_map(|x| half::f16::from_f32(f32::from(x)).to_le_bytes())
        .collect();
    assert_eq!(
        tensor_f64(&t, Dtype::F16, &data, &mut meter, "x"),
        Ok(vec![1.0, 3.0, 2.0, 4.0])
    );
    let data: Vec<u8> = (0u16..6)
        .flat_map(|x| half::bf16::from_f32(f32::from(x)).to_le_bytes())
        .collect();
    assert_eq!(
        tensor_f64(&t, Dtype::Bf16, &data, &mut meter, "x"),
        Ok(vec![1.0, 3.0, 2.0, 4.0])
    );
    let e = tensor_f64(&t, Dtype::Bf16, &data[..8], &mut meter, "x").unwrap_err();
    assert!(e.to_string().contains("past its storage"), "{e}");
}

#[test]
fn legacy_detection_needs_the_magic() {
    let head = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
    assert!(is_legacy(head));
    assert!(!is_legacy(&head[..10]));
    assert!(!is_legacy(
        b"\x80\x02\x8a\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00."
    ));
    let framed = [
        b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00".as_slice(),
        &head[2..],
    ]
    .concat();
    assert!(is_legacy(&framed));
}
